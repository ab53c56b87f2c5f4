"""The scheme language: text round trip, validation errors, footprints (plain Python)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvm_ttile.scheme import Lambda, R, Scheme, SchemeError, T, U, V, conv2d_footprint, matmul_footprint

# Yolo9000-12 on AVX-512, from the paper: K=512, H=W=34, C=256, R=S=3.
YOLO12 = "[T(16,k),Lambda(h,[(2,11),(1,12)]),T(17,w),T(3,s),T(3,r),T(2,w),T(256,c),U(lambda,h),U(2,k),V(k)]"
YOLO12_SIZES = {"k": 512, "h": 34, "w": 34, "c": 256, "r": 3, "s": 3}


def test_paper_example_round_trips_and_validates():
    s = Scheme.parse(YOLO12)
    assert s.text == YOLO12 and Scheme.parse(s.text) == s
    assert s.specs[1] == Lambda("h", ((2, 11), (1, 12)))
    s.validate(YOLO12_SIZES, lanes=16, reduction="c")


def test_blis_example():
    s = Scheme.parse("[R(i),R(j),T(64,k),U(6,i),U(2,j),V(j)]")
    assert s.specs == (R("i"), R("j"), T(64, "k"), U(6, "i"), U(2, "j"), V("j"))
    s.validate({"i": 12, "j": 64, "k": 64}, lanes=8, reduction="k")




@given(st.lists(st.tuples(st.sampled_from("RTU"), st.integers(1, 64), st.sampled_from("hwkc")), max_size=6),
       st.booleans())
def test_text_round_trip_for_any_scheme(items, vector):
    made = [R(d) if k == "R" else (T(n, d) if k == "T" else U(n, d)) for k, n, d in items]
    if vector:
        made.append(V("k"))
    s = Scheme(tuple(made))
    assert Scheme.parse(s.text) == s


@pytest.mark.parametrize("text,message", [
    ("[T(4,h),V(k),U(2,k)]", "innermost"),
    ("[V(k),V(k)]", "at most one V"),
    ("[T(5,h),T(16,c),U(2,k),V(k)]", "does not divide|cover"),
    ("[T(3,h),T(16,c),U(2,k),V(k)]", "cover"),
    ("[T(34,h),T(16,c),U(lambda,h),V(k)]", "needs a Lambda"),
    ("[Lambda(h,[(2,11),(1,13)]),T(16,c),U(lambda,h),U(2,k),V(k)]", "cover 35"),
    ("[Lambda(h,[(2,11)]),T(16,c),U(lambda,h),U(2,k),V(k)]", "two or more"),
    ("[T(34,h),T(16,c),T(2,k),U(1,h),V(k)]", "directly above the microkernel"),
    ("[T(34,h),U(2,q),V(k)]", "unknown dimension"),
    ("[T(0,h)]", "positive"),
])
def test_validation_errors_name_the_rule(text, message):
    with pytest.raises(SchemeError, match=message):
        Scheme.parse(text).validate({"h": 34, "k": 32, "c": 16}, lanes=16, reduction="c")


@pytest.mark.parametrize("bad", ["T(4,h)", "[T(4,h)", "[T(x,h)]", "[Q(4,h)]", "[T(4,h)U(2,k)]", "[Lambda(h,[2,11])]",
                                 "[InPlace(pass),T(4,h)]", "[InPlace(),T(4,h)]"])
def test_unreadable_text(bad):
    with pytest.raises(SchemeError):
        Scheme.parse(bad)


def test_footprints_per_level():
    s = Scheme.parse(YOLO12)
    fps = s.footprints(16, conv2d_footprint())
    # the microkernel's reduction loop T(256,c): output tile 12 x 32 for the larger Lambda part
    assert fps[6]["output"] == 12 * 32 and fps[6]["weights"] == 256 * 32 and fps[6]["input"] == 12 * 256
    assert fps[7]["weights"] == 32 and fps[9]["weights"] == 16
    assert fps[0]["output"] == 34 * 34 * 512  # the outermost level is the whole output
    assert all(a[t] >= b[t] for a, b in zip(fps, fps[1:]) for t in a)
    m = Scheme.parse("[R(i),T(4,j),T(64,k),U(6,i),U(2,j),V(j)]").footprints(8, matmul_footprint)
    assert m[2] == {"A": 6 * 64, "B": 64 * 16, "C": 6 * 16}


def test_pad_specifiers_come_first_and_the_loops_tile_the_padded_sizes():
    text = "[Pad(40,i),Pad(528,k),T(4,i),T(2,j),T(66,k),T(8,k),U(10,i),V(j)]"
    s = Scheme.parse(text)
    assert s.text == text and Scheme.parse(s.text) == s
    assert s.padding == {"i": 40, "k": 528} and not any(type(x).__name__ == "Pad" for x in s.specs)
    assert Scheme.parse("[Pad(528,k),Pad(40,i),T(4,i),T(2,j),T(66,k),T(8,k),U(10,i),V(j)]") == s  # canonical order
    s.validate({"i": 37, "j": 16, "k": 521}, lanes=8, reduction="k")
    assert s.unpadded.with_pads(s.padding) == s
    with pytest.raises(SchemeError, match="does not divide|cover"):
        s.unpadded.validate({"i": 37, "j": 16, "k": 521}, lanes=8, reduction="k")


def test_in_place_comes_after_the_pads_and_survives_their_removal():
    text = "[Pad(40,i),InPlace(copy),T(4,i),T(2,j),T(66,k),T(8,k),U(10,i),V(j)]"
    s = Scheme.parse(text)
    assert s.text == text and Scheme.parse(s.text) == s and s.in_place == "copy"
    assert Scheme.parse("[InPlace(copy),Pad(40,i),T(4,i),T(2,j),T(66,k),T(8,k),U(10,i),V(j)]") == s  # canonical
    assert s.unpadded.in_place == "copy" and s.unpadded.with_pads(s.padding) == s
    assert s.with_in_place("").text == text.replace("InPlace(copy),", "")
    assert Scheme.parse("[InPlace(guard),Par(2,h),T(2,h),U(2,k),V(k)]").per_core().text == \
        "[InPlace(guard),T(2,h),U(2,k),V(k)]"


@pytest.mark.parametrize("text,message", [
    ("[T(4,i),Pad(40,i),T(66,k),U(10,i),V(j)]", "Pad and InPlace specifiers come first"),
    ("[T(4,i),InPlace(guard),T(66,k),U(10,i),V(j)]", "Pad and InPlace specifiers come first"),
    ("[InPlace(guard),InPlace(copy),T(4,i),T(66,k),U(10,i),V(j)]", "at most one InPlace"),
    ("[Pad(40,i),Pad(48,i),T(4,i),T(66,k),U(10,i),V(j)]", "one Pad per dimension"),
    ("[Pad(36,i),T(66,k),U(4,i),U(9,i),V(j)]", "to a larger size"),
    ("[Pad(40,x),T(66,k),U(4,i),U(10,i),V(j)]", "unknown dimension"),
])
def test_bad_pad_specifiers(text, message):
    with pytest.raises(SchemeError, match=message):
        Scheme.parse(text).validate({"i": 37, "j": 8, "k": 66}, lanes=8, reduction="k")
