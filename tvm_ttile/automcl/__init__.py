"""AutoMCL-style matmul schedule selection (issue #6): compute variants, analytic space, learned choice."""
