"""N-A2C (the seed paper's Algorithm 2): walks of T steps from a centre, each step's action drawn from an actor
network with probability tau and at random otherwise; every state a walk reaches for the first time is measured.
After each measured batch the actor and critic are trained on a memory of the latest transitions and the centre
moves to the best state ever measured.

How they are trained (the paper gives the scheme, not the details; these are ours): a transition is (s, a, s',
reward) with reward log(t_ref / t(s')), t_ref the first measured time: the paper's 1/T made scale-free, so that
the networks see the same numbers on a 1 ms and on a 1 s problem. The critic V (one tanh hidden layer) is fitted
to the one-step target r + gamma V(s'); the actor (same shape, a softmax over the landscape's actions, the
actions leading outside the space masked) follows the policy gradient of log pi(a|s) x advantage (target - V(s)).
Adam, minibatches drawn from the memory with the search's seed. numpy only.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from .gbfs import SchemeSearchStrategy
from .neighbours import NeighbourhoodSearch


class TinyNet:
    """x -> tanh(x W1 + b1) W2 + b2, with Adam."""

    def __init__(self, n_in, n_out, hidden, rng):
        self.params = [rng.normal(0, 1 / math.sqrt(max(n_in, 1)), (n_in, hidden)), np.zeros(hidden),
                       rng.normal(0, 0.1 / math.sqrt(hidden), (hidden, n_out)), np.zeros(n_out)]
        self.moments = [(np.zeros_like(p), np.zeros_like(p)) for p in self.params]
        self.t = 0

    def forward(self, x):
        h = np.tanh(x @ self.params[0] + self.params[1])
        return h, h @ self.params[2] + self.params[3]

    def backward(self, x, h, dout, lr):
        """One Adam step from dLoss/dOutput (rows averaged)."""
        dh = (dout @ self.params[2].T) * (1 - h * h)
        grads = [x.T @ dh, dh.sum(0), h.T @ dout, dout.sum(0)]
        self.t += 1
        for p, g, (m, v) in zip(self.params, grads, self.moments):
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            p -= lr * (m / (1 - 0.9 ** self.t)) / (np.sqrt(v / (1 - 0.999 ** self.t)) + 1e-8)


class NA2C(NeighbourhoodSearch):
    NAME = "na2c"
    OPTIONS = {"steps": (3, "steps of each walk from the centre (the paper's T)"),
               "tau": (0.5, "probability that a step follows the actor (else a random action); the paper gives none"),
               "memory": (1000, "transitions kept for training (the paper's fixed-size buffer M)"),
               "gamma": (0.9, "discount of the critic's one-step target"),
               "hidden": (32, "units of the actor's and critic's hidden layer"),
               "lr": (0.01, "Adam's step size"),
               "updates": (20, "minibatch updates of both networks after each measured batch"),
               "minibatch": (32, "transitions per update"),
               **NeighbourhoodSearch.START}

    def __init__(self, landscape, seed=0, **options):
        super().__init__(landscape, seed, **options)
        self.np_rng = np.random.default_rng(seed)
        self.n_actions = len(landscape.actions)
        self.actor = self.critic = None
        self.memory = deque(maxlen=self.options["memory"])
        self.walked: dict = {}  # key of a state asked -> (features, mask, action, features') of the step to it
        self.centre = None
        self.reference = None  # the first measured seconds: rewards are log(reference / seconds)

    def _nets(self, n_in):
        if self.actor is None:
            h = self.options["hidden"]
            self.actor = TinyNet(n_in, self.n_actions, h, self.np_rng)
            self.critic = TinyNet(n_in, 1, h, self.np_rng)

    def _reward(self, seconds):
        if not math.isfinite(seconds):
            return -1.0  # failed to build or run: worse than a state 2.7x slower than the reference
        if self.reference is None:
            self.reference = seconds
        return math.log(self.reference / seconds)

    def _legal(self, state):
        mask = np.zeros(self.n_actions, bool)
        nexts = {}
        for i, a in enumerate(self.land.actions):
            s = self.land.step(state, a)
            if s is not None:
                mask[i], nexts[i] = True, s
        return mask, nexts

    def _policy(self, x, mask):
        self._nets(len(x))
        _, logits = self.actor.forward(np.asarray([x]))
        z = np.where(mask, logits[0], -np.inf)
        p = np.exp(z - z.max())
        return p / p.sum()

    def ask(self, n):
        batch = []
        if self.centre is None:
            self.centre = self.best[1] if self.best else self.first_state()
            if self.fresh(self.centre):
                self._ask(self.centre, batch)
        walks = 0
        while len(batch) < n and walks < 20 * n:
            walks += 1
            s = self.centre
            for _ in range(self.options["steps"]):
                x = self.land.features(s)
                mask, nexts = self._legal(s)
                if not nexts:
                    break
                if self.rng.random() < self.options["tau"]:
                    a = int(self.np_rng.choice(self.n_actions, p=self._policy(x, mask)))
                else:
                    a = self.rng.choice(sorted(nexts))
                s2 = nexts[a]
                step = (x, mask, a, self.land.features(s2))
                k2 = self.land.key(s2)
                if k2 in self.visited:
                    self.memory.append(step[:3] + (self._reward(self.visited[k2]), step[3]))
                elif self.fresh(s2):
                    self.walked[k2] = step
                    self._ask(s2, batch)
                    if len(batch) >= n:
                        break
                s = s2
        if not batch and not self.pending:
            s = self.restart()
            if s is not None:
                self.centre = s
                self._ask(s, batch)
        return batch

    def heard(self, state, seconds):
        r = self._reward(seconds)
        step = self.walked.pop(self.land.key(state), None)
        if step is not None:
            self.memory.append(step[:3] + (r, step[3]))

    def learn(self):
        if self.best is not None:
            self.centre = self.best[1]  # the centre of the next walks: the best state ever measured
        if not self.memory:
            return
        self._nets(len(self.memory[0][0]))
        gamma, lr = self.options["gamma"], self.options["lr"]
        for _ in range(self.options["updates"]):
            idx = self.np_rng.integers(0, len(self.memory), min(self.options["minibatch"], len(self.memory)))
            x = np.array([self.memory[i][0] for i in idx])
            mask = np.array([self.memory[i][1] for i in idx])
            a = np.array([self.memory[i][2] for i in idx])
            r = np.array([self.memory[i][3] for i in idx])
            x2 = np.array([self.memory[i][4] for i in idx])
            hv, v = self.critic.forward(x)
            _, v2 = self.critic.forward(x2)
            target = r + gamma * v2[:, 0]
            advantage = target - v[:, 0]
            self.critic.backward(x, hv, (-advantage / len(idx))[:, None], lr)
            ha, logits = self.actor.forward(x)
            z = np.where(mask, logits, -1e9)
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            onehot = np.zeros_like(p)
            onehot[np.arange(len(idx)), a] = 1
            self.actor.backward(x, ha, -(advantage[:, None] * (onehot - p)) / len(idx), lr)


class NA2CStrategy(SchemeSearchStrategy):
    NAME = "na2c"
    SEARCH = NA2C
    OPTIONS = NA2C.OPTIONS
