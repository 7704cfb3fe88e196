"""The centralized family against a per-client reference written from the spec (3.10-3.24), the
reduction identities, communication accounting and exact resume."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from algorithms import CENTRALIZED
from algorithms.fedfsa import UNSCORED, sensitivity, top_layers
from algorithms.fedgloss import warmup
from p2pfl.callbacks import RoundEnd
from p2pfl.config import ConfigError
from p2pfl.core.models import build_model
from p2pfl.engine import build
from tests.conftest import every_option, option_names, play, small_config

SAM_EPS, CLIP_EPS = 1e-7, 1e-6


pytestmark = pytest.mark.usefixtures("one_thread")


def _config(name: str, **overrides):
    base = {"algorithm__name": name, "topology__name": "star", "data__num_nodes": 4,
            "algorithm__participation": 0.5, "algorithm__local_steps": 2,
            "algorithm__batch_size": 8, "algorithm__lr": 0.05, "algorithm__lr_decay": 0.9,
            "algorithm__weight_decay": 1e-3, "algorithm__clip_norm": 3.0}
    base.update(overrides)
    return small_config(**base)


class Flat:
    """One client's model as ONE flat vector, evaluated with functional_call on an nn.Module."""

    def __init__(self, ctx) -> None:
        self.model = build_model("mlp", ctx.data.input_shape,
                                 ctx.data.num_classes).to(dtype=ctx.dtype)
        self.layout = []
        offset = 0
        for name, p in self.model.named_parameters():
            self.layout.append((name, slice(offset, offset + p.numel()), p.shape))
            offset += p.numel()

    def flat(self, params: dict) -> torch.Tensor:
        return torch.cat([params[name].reshape(-1) for name, _, _ in self.layout])

    def unflat(self, v: torch.Tensor) -> dict:
        return {name: v[s].view(shape) for name, s, shape in self.layout}

    def grad(self, v, xb, yb, teacher=None, gamma=0.0, tau=1.0):
        w = v.detach().clone().requires_grad_()
        logits = functional_call(self.model, self.unflat(w), (xb,))
        loss = F.cross_entropy(logits, yb)
        objective = loss
        if teacher is not None:
            with torch.no_grad():
                target = functional_call(self.model, self.unflat(teacher), (xb,))
            kl = F.kl_div(F.log_softmax(logits / tau, -1), F.log_softmax(target / tau, -1),
                          reduction="batchmean", log_target=True)
            objective = loss + gamma * tau**2 * kl
        (g,) = torch.autograd.grad(objective, w)
        return g


def _unit(v: torch.Tensor, eps: float = SAM_EPS) -> torch.Tensor:
    return v / (v.norm() + eps)


def reference(ctx, algorithm, rounds: int) -> torch.Tensor:
    """The server model after `rounds` rounds, one client and one step at a time."""
    a = every_option(algorithm.cfg)
    name, N, R = a.name, ctx.num_nodes, Flat(ctx)
    w = R.flat({k: v[0] for k, v in ctx.population.params.items()})
    zero = torch.zeros_like(w)
    c, s, delta, m1, m2, sigma, D = zero, zero, zero, zero, zero, zero, zero
    ci, h, mu = [zero] * N, [zero] * N, [zero] * N
    old, ema, sel = [None] * N, w.clone(), [set() for _ in range(N)]
    beta = 1 / a.dyn_alpha
    data = algorithm.data  # FedFSA trains on each client's 70 % share
    sam = name in ("fedsam", "mofedsam", "fedgamma", "fedspeed", "fedgloss", "naive_fedgloss")

    def local(i, start, plan, lr, t):
        x, buf = start.clone(), zero
        rho = a.rho
        if name in ("fedgloss", "naive_fedgloss") and a.rho_warmup:
            rho = a.rho_start + (a.rho - a.rho_start) * min(t + 1, a.rho_warmup) / a.rho_warmup
        e_fixed = zero
        if name.startswith("fedlesam") and old[i] is not None:
            e_fixed = a.rho * _unit(old[i] - start)
        for step in range(plan.steps):
            xb, yb = (batch := data.batch(plan, step, torch.tensor([i]))).x, batch.y
            xb, yb = xb[0], yb[0]
            teacher = ema if name == "fedgmt" else None
            g1 = R.grad(x, xb, yb, teacher, a.distill_gamma, a.kl_temperature)
            g = g1
            if name.startswith("fedlesam"):
                g = R.grad(x + e_fixed, xb, yb)
            elif name == "fedsmoo":
                direction = g1 - mu[i] - s
                e = a.rho * _unit(direction)
                mu[i] = mu[i] + e - s
                g = R.grad(x + e, xb, yb)
            elif name == "fedfsa":
                radii = torch.cat([torch.full((sl.stop - sl.start,),
                                              a.rho_larger if k in sel[i] else a.rho,
                                              dtype=torch.float64)
                                   for k, (_, sl, _) in enumerate(R.layout)])
                g = R.grad(x + radii * g1 / (g1.norm() + SAM_EPS), xb, yb)
            elif sam and rho > 0:
                g2 = R.grad(x + rho * _unit(g1), xb, yb)
                mix = a.quasi_alpha if (name == "fedspeed" and a.variant == "paper") else 1.0
                g = (1 - mix) * g1 + mix * g2
            if name in ("fedcm", "mofedsam", "fedfsa"):
                d = a.cm_alpha * g + (1 - a.cm_alpha) * delta
            elif name in ("scaffold", "fedgamma", "fedlesam_s"):
                scale = a.correction_scale if a.variant == "reference_code" else 1.0
                d = g + scale * (c - ci[i])
            elif name in ("feddyn", "fedspeed", "fedsmoo", "fedlesam_d", "fedgloss",
                          "naive_fedgloss"):
                d = g + a.dyn_alpha * (x - start) + a.dyn_alpha * h[i]
            elif name == "fedgmt":
                d = g + h[i] / beta  # - u_i with u_i = -h_i / beta
            elif name == "fedprox":
                d = g + a.prox_mu * (x - start)
            else:
                d = g
            if a.clip_norm > 0:
                d = d * min(1.0, a.clip_norm / (d.norm().item() + CLIP_EPS))
            d = d + a.weight_decay * x
            buf = a.momentum * buf + d
            x = x - lr * buf
        return x

    for t in range(rounds):
        nodes = algorithm.sample(ctx, t).tolist()
        lr = a.lr * a.lr_decay**t
        plan = data.plan(ctx.seed, t, a.batch_size, 0, a.local_steps)
        start = w
        if name == "fedgloss" and a.server_rho > 0 and D.norm() > 0:
            start = w + a.server_rho * D / D.norm()
        if name == "naive_fedgloss":
            first = torch.stack([local(i, w, plan, lr, t) for i in nodes]).mean(0)
            start = w + a.server_rho * (w - first) / (w - first).norm()
        trained = {i: local(i, start, plan, lr, t) for i in nodes}
        mean = torch.stack(list(trained.values())).mean(0)
        U = mean - start
        if name in ("fedavg", "fedsam", "fedprox", "fedlesam"):
            w = w + a.server_lr * U
        elif name == "fedadam":
            m1 = a.server_beta1 * m1 + (1 - a.server_beta1) * U
            m2 = a.server_beta2 * m2 + (1 - a.server_beta2) * U**2
            w = w + a.server_lr * m1 / (m2.sqrt() + a.server_tau)
        elif name in ("fedcm", "mofedsam", "fedfsa"):
            w = w + a.server_lr * U
            delta = -U / (plan.steps * lr)
        elif name in ("scaffold", "fedgamma", "fedlesam_s"):
            total = zero
            for i in nodes:
                new = ci[i] - c + (start - trained[i]) / (plan.steps * lr)
                total = total + (new - ci[i])
                ci[i] = new
            c = c + total / N
            w = w + a.server_lr * U
        elif name in ("feddyn", "fedspeed", "fedsmoo", "fedlesam_d", "fedgmt"):
            for i in nodes:
                h[i] = h[i] + trained[i] - start
            active = name in ("fedspeed", "fedgmt") and a.variant == "paper"
            correction = (torch.stack([h[i] for i in nodes]).mean(0) if active
                          else torch.stack(h).mean(0))
            w = mean + correction
            if name == "fedsmoo":
                mbar = torch.stack([mu[i] for i in nodes]).mean(0)
                s = a.rho * _unit(mbar)
            if name == "fedgmt":
                ema = a.ema_alpha * ema + (1 - a.ema_alpha) * w
        elif name in ("fedgloss", "naive_fedgloss"):
            for i in nodes:
                h[i] = h[i] + trained[i] - start
            if a.variant == "paper":
                sigma = sigma - sum(trained[i] - w for i in nodes) / (beta * N)
            else:
                sigma = sigma - sum(trained[i] - start for i in nodes) / (beta * N * len(nodes))
            D = start - mean
            w = w - a.server_lr * D - beta * sigma
        if name == "fedfsa":
            for i in nodes:
                scores = []
                for pname, sl, _ in R.layout:
                    before, after = start[sl], trained[i][sl]
                    if any(tag in pname for tag in UNSCORED):
                        scores.append(-math.inf)
                        continue
                    if a.variant == "reference_code":
                        before = (before - before.min()) / (before.max() - before.min())
                        after = (after - after.min()) / (after.max() - after.min())
                        scores.append(torch.dot(after - before, after - before).item()
                                      / before.numel())
                    else:  # the poster: |dw . e| with e = dw, an inner product over the layer
                        scores.append(torch.dot(after - before, after - before).item())
                order = sorted(range(len(scores)), key=lambda k: -scores[k])
                sel[i] = {k for k in order[:a.top_c] if scores[k] > -math.inf}
        if name.startswith("fedlesam"):
            for i in nodes:
                old[i] = start.clone()
    return w


CASES = {
    "fedavg": {"algorithm__server_lr": 0.7},
    "fedprox": {"algorithm__prox_mu": 0.5},
    "fedadam": {"algorithm__server_lr": 0.1},
    "fedcm": {"algorithm__cm_alpha": 0.3},
    "scaffold": {},
    "feddyn": {"algorithm__dyn_alpha": 0.3},
    "fedsam": {"algorithm__rho": 0.2},
    "mofedsam": {"algorithm__rho": 0.2, "algorithm__cm_alpha": 0.3},
    "fedgamma": {"algorithm__rho": 0.2},
    "fedsmoo": {"algorithm__rho": 0.2, "algorithm__dyn_alpha": 0.3},
    "fedspeed": {"algorithm__rho": 0.2, "algorithm__dyn_alpha": 0.3,
                 "algorithm__quasi_alpha": 0.7},
    "fedspeed-code": {"algorithm__name": "fedspeed", "algorithm__variant": "reference_code",
                      "algorithm__rho": 0.2},
    "fedlesam": {"algorithm__rho": 0.5},
    "fedlesam_s": {"algorithm__rho": 0.5},
    "fedlesam_s-code": {"algorithm__name": "fedlesam_s", "algorithm__variant": "reference_code",
                        "algorithm__rho": 0.5, "algorithm__correction_scale": 0.3},
    "fedlesam_d": {"algorithm__rho": 0.5},
    "fedgmt": {"algorithm__variant": "paper", "algorithm__distill_gamma": 2.0,
               "algorithm__kl_temperature": 3.0, "algorithm__ema_alpha": 0.5,
               "algorithm__momentum": 0.5},
    "fedgmt-code": {"algorithm__name": "fedgmt", "algorithm__variant": "reference_code",
                    "algorithm__ema_alpha": 0.5},
    "fedgloss": {"algorithm__variant": "paper", "algorithm__rho": 0.1,
                 "algorithm__server_rho": 0.3,
                 "algorithm__dyn_alpha": 0.5, "algorithm__rho_warmup": 2,
                 "algorithm__server_rho_warmup": False, "algorithm__server_lr": 0.8},
    "fedgloss-code": {"algorithm__name": "fedgloss", "algorithm__variant": "reference_code",
                      "algorithm__rho": 0.1, "algorithm__server_rho": 0.3,
                      "algorithm__rho_warmup": 0},
    "naive_fedgloss": {"algorithm__variant": "paper", "algorithm__rho": 0.1,
                       "algorithm__server_rho": 0.3, "algorithm__rho_warmup": 0},
    "fedfsa": {"algorithm__rho": 0.1, "algorithm__rho_larger": 0.6, "algorithm__top_c": 1,
               "algorithm__cm_alpha": 0.3},
    "fedfsa-code": {"algorithm__name": "fedfsa", "algorithm__variant": "reference_code",
                    "algorithm__rho": 0.1, "algorithm__rho_larger": 0.6},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rounds_match_the_per_client_reference(case):
    overrides = dict(CASES[case])
    name = overrides.pop("algorithm__name", case)
    ctx, algorithm = build(_config(name, **overrides))
    rounds = 3
    expected = reference(ctx, algorithm, rounds)  # reads only the initial population
    for t in range(rounds):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    got = Flat(ctx).flat(algorithm.server)
    assert (got - expected).abs().max().item() < 1e-10


IDENTITIES = [
    # (algorithm, its overrides, reduces to, their overrides); each pair runs different code
    ("fedlesam", {"algorithm__rho": 0.0}, "fedavg", {}),
    ("fedlesam_s", {"algorithm__rho": 0.0}, "scaffold", {}),
    ("fedlesam_d", {"algorithm__rho": 0.0}, "feddyn", {}),
    ("mofedsam", {"algorithm__rho": 0.2, "algorithm__cm_alpha": 1.0}, "fedsam",
     {"algorithm__rho": 0.2}),
    ("fedcm", {"algorithm__cm_alpha": 1.0}, "fedavg", {}),
    ("fedgloss", {"algorithm__variant": "paper", "algorithm__rho": 0.0,
                  "algorithm__server_rho": 0.0, "algorithm__dyn_alpha": 0.25},
     "feddyn", {"algorithm__dyn_alpha": 0.25}),
    ("fedprox", {"algorithm__prox_mu": 0.0}, "fedavg", {}),
]


@pytest.mark.parametrize("name, overrides, base, base_overrides", IDENTITIES)
def test_reduction_identities(name, overrides, base, base_overrides):
    ctx_a, alg_a = build(_config(name, **overrides))
    ctx_b, alg_b = build(_config(base, **base_overrides))
    for t in range(3):
        play(alg_a, ctx_a, t, ctx_a.schedule.at(t))
        play(alg_b, ctx_b, t, ctx_b.schedule.at(t))
    for k, v in alg_a.server.items():
        torch.testing.assert_close(v, alg_b.server[k], rtol=0, atol=1e-12)


def _server_after(name: str, rounds: int = 3, **overrides) -> dict[str, torch.Tensor]:
    ctx, algorithm = build(_config(name, **overrides))
    for t in range(rounds):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    return algorithm.server


@pytest.mark.parametrize("name, base, overrides", [
    ("fedsam", "fedavg", {}),
    ("mofedsam", "fedcm", {}),
    ("fedgamma", "scaffold", {}),
    ("fedspeed", "feddyn", {"algorithm__variant": "reference_code"}),
])
def test_sam_variant_with_a_vanishing_radius_is_its_base(name, base, overrides):
    """rho = 1e-9 runs the SAM branch (ascent, second gradient, restore) and must land within
    O(rho) of the base algorithm's SGD clients; rho = 0.05 must not (rho = 0 would skip the
    branch and compare the base with itself)."""
    sam = _server_after(name, algorithm__rho=1e-9, **overrides)
    plain = _server_after(base)
    wide = _server_after(name, algorithm__rho=0.05, **overrides)
    for k, v in plain.items():
        torch.testing.assert_close(sam[k], v, rtol=0, atol=1e-7)
    assert max((wide[k] - v).abs().max().item() for k, v in plain.items()) > 1e-5


def test_fedfsa_with_equal_radii_is_mofedsam_on_the_same_data():
    """Both hold out the same personal splits (the paper's protocol): the same training data."""
    kw = {"algorithm__rho": 0.2, "algorithm__personal_fraction": 0.3}
    ctx_a, fsa = build(_config("fedfsa", algorithm__rho_larger=0.2, **kw))
    ctx_b, mo = build(_config("mofedsam", **kw))
    for t in range(3):
        play(fsa, ctx_a, t, ctx_a.schedule.at(t))
        play(mo, ctx_b, t, ctx_b.schedule.at(t))
    assert fsa.selected.any(), "layers must have been selected for the identity to mean anything"
    for k, v in fsa.server.items():
        torch.testing.assert_close(v, mo.server[k], rtol=0, atol=1e-12)


def test_fedsam_and_fedlesam_differ_from_fedavg_when_rho_is_positive():
    servers = {}
    for name in ("fedavg", "fedsam", "fedlesam"):
        ctx, alg = build(_config(name, algorithm__rho=0.0 if name == "fedavg" else 0.5))
        for t in range(3):
            play(alg, ctx, t, ctx.schedule.at(t))
        servers[name] = Flat(ctx).flat(alg.server)
    assert (servers["fedsam"] - servers["fedavg"]).abs().max() > 1e-6
    assert (servers["fedlesam"] - servers["fedavg"]).abs().max() > 1e-6


# Model copies per sampled client per round (down, up).
COPIES = {"fedavg": (1, 1), "fedprox": (1, 1), "fedadam": (1, 1), "fedcm": (2, 1),
          "scaffold": (2, 2), "feddyn": (1, 1), "fedsam": (1, 1), "mofedsam": (2, 1),
          "fedgamma": (2, 2), "fedsmoo": (2, 2), "fedspeed": (1, 1), "fedlesam": (1, 1),
          "fedlesam_s": (2, 2), "fedlesam_d": (1, 1), "fedgmt": (2, 1), "fedgloss": (1, 1),
          "naive_fedgloss": (2, 2), "fedfsa": (2, 1)}


def test_every_centralized_algorithm_is_in_the_copies_table():
    assert {cls.name for cls in CENTRALIZED} == set(COPIES)


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_and_bytes_per_round_match_the_spec(name, tmp_path):
    from p2pfl.engine import run

    cfg = _config(name, rounds=1, data__num_nodes=10, algorithm__participation=0.3,
                  algorithm__local_steps=1)
    history = run(cfg, tmp_path / name)
    down, up = COPIES[name]
    ctx, _ = build(cfg)
    assert history[0]["messages"] == 3 * (down + up)
    assert history[0]["bytes_sent"] == 3 * (down + up) * ctx.population.num_params * 8


@pytest.mark.parametrize("name", sorted(COPIES))
def test_resume_from_state_dict_gives_the_same_next_round(name):
    cls = next(c for c in CENTRALIZED if c.name == name)
    knobs = {"rho": 0.2, "server_rho": 0.2, "momentum": 0.5}  # where the algorithm reads them
    reads = option_names(cls)
    cfg = _config(name, **{f"algorithm__{k}": v for k, v in knobs.items() if k in reads})
    ctx, algorithm = build(cfg)
    for t in range(2):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    saved = (ctx.population.state_dict(), algorithm.state_dict())
    play(algorithm, ctx, 2, ctx.schedule.at(2))
    expected = {k: v.clone() for k, v in algorithm.server.items()}
    expected_metrics = algorithm.metrics(ctx)

    fresh_ctx, fresh = build(cfg)  # a new process: nothing but the saved state carries over
    fresh_ctx.population.load_state_dict(saved[0])
    fresh.load_state_dict(saved[1])
    play(fresh, fresh_ctx, 2, fresh_ctx.schedule.at(2))
    for k, v in fresh.server.items():
        assert torch.equal(v, expected[k]), k
    assert torch.equal(fresh_ctx.population.flat, ctx.population.flat)
    assert fresh.metrics(fresh_ctx) == expected_metrics


def test_only_sampled_clients_change_their_state():
    ctx, algorithm = build(_config("fedsmoo", algorithm__rho=0.2, data__num_nodes=6))
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    nodes = algorithm.last_nodes
    others = torch.tensor([i for i in range(6) if i not in nodes.tolist()])
    for state in (algorithm.dual.drift, algorithm.perturb_dual):
        for v in state.values.values():
            assert v[others].abs().max() == 0 and v[nodes].abs().max() > 0


def test_fedfsa_holds_out_a_personal_split_and_logs_personal_accuracy():
    cfg = _config("fedfsa", algorithm__rho=0.1, rounds=1, algorithm__personal_fraction=0.3)
    ctx, algorithm = build(cfg)
    train, test = algorithm.data, algorithm.personal.tests
    for i in range(ctx.num_nodes):
        n = int(ctx.data.sizes[i])
        assert len(test[i]) == round(0.3 * n) and train.sizes[i] + len(test[i]) == n
        both = torch.cat([train.node_indices(i), torch.as_tensor(test[i])]).sort().values
        assert torch.equal(both, ctx.data.node_indices(i).sort().values)
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    before = {k: v.clone() for k, v in algorithm.server.items()}
    [personal] = algorithm.callbacks(ctx)
    metrics = personal.after_round(RoundEnd(0, {}, [], ctx, algorithm, cfg=cfg))
    assert 0 <= metrics["test_acc_personal_global"] <= 1
    assert metrics["test_acc_personal"] > metrics["test_acc_personal_global"]
    assert all(torch.equal(v, algorithm.server[k]) for k, v in before.items())


def test_fedgloss_rho_warmup_counts_rounds_from_one_then_stays():
    """Paper Algorithm 1 / Appendix C: rho(t) = rho_0 + (rho - rho_0) t / T_s for rounds
    t = 1..T_s; `warmup` takes the engine's 0-based round index."""
    assert warmup(0.15, 0.001, 10, 0) == pytest.approx(0.001 + 0.149 / 10)  # round 1
    assert warmup(0.15, 0.001, 10, 4) == pytest.approx(0.001 + 0.149 / 2)  # round 5
    assert warmup(0.15, 0.001, 10, 9) == 0.15 == warmup(0.15, 0.001, 0, 0)  # round 10
    assert warmup(0.15, 0.001, 10, 50) == 0.15
    assert warmup(0.0, 0.001, 10, 0) == 0.0  # no SAM (FedGloSS (SGD)): nothing warms up


def test_fedfsa_paper_sensitivity_is_the_sum_of_squared_changes():
    """A big layer with small changes against a small layer with big ones: the sum (paper)
    picks the big layer, a mean would pick the small one."""
    start = {"fc1.weight": torch.zeros(100), "fc2.weight": torch.zeros(2),
             "fc2.bias": torch.zeros(2)}
    trained = {"fc1.weight": torch.full((1, 100), 0.1), "fc2.weight": torch.full((1, 2), 0.5),
               "fc2.bias": torch.full((1, 2), 9.0)}
    scores = sensitivity(start, trained, normalise=False)
    torch.testing.assert_close(scores[0, :2], torch.tensor([1.0, 0.5]))
    assert scores[0, 2] == -math.inf  # biases are never selected
    assert top_layers(scores, 1).tolist() == [[True, False, False]]


def test_variant_and_executor_errors_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="algorithm.variant: feddyn has no 'reference_code'"):
        build(_config("feddyn", algorithm__variant="reference_code"))
    with pytest.raises(ConfigError, match="engine.executor"):
        build(_config("scaffold", engine__executor="loop"))
    with pytest.raises(ConfigError, match="algorithm.variant"):
        _config("fedavg", algorithm__variant="code")


@pytest.mark.parametrize("path", ["centralized_fmnist", "fedgloss_cifar10_cnn_alpha0",
                                  "fedgloss_cifar10_cnn_alpha005", "fedgloss_fmnist",
                                  "fedlesam_cifar10", "fedlesam_fmnist"])
def test_centralized_configs_validate(path):
    from p2pfl.config import load_config

    cfg = load_config(f"configs/{path}.toml")
    assert cfg.topology.name == "star" and len(cfg.compare) >= 8


def test_bernoulli_sampling_varies_the_number_of_clients_and_accounts_for_it():
    cfg = _config("scaffold", data__num_nodes=20, algorithm__participation=0.3,
                  algorithm__sampling="bernoulli")
    ctx, algorithm = build(cfg)
    sizes = {len(algorithm.sample(ctx, t)) for t in range(30)}
    assert len(sizes) > 2 and min(sizes) >= 1
    report = play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert report.copies_sent == 4 * len(report.nodes)
    _, fixed = build(_config("scaffold", data__num_nodes=20, algorithm__participation=0.3))
    assert {len(fixed.sample(ctx, t)) for t in range(5)} == {6}


def test_any_server_algorithm_takes_the_personalised_evaluation():
    """FedAvg with personal_fraction is the FedFSA paper's FedAvg-FT: clients train on the rest
    of their data only, and test_acc_personal_global is the server model on their splits."""
    plain_ctx, plain = build(_config("fedavg", rounds=1))
    assert plain.callbacks(plain_ctx) == [] and plain.data is plain_ctx.data
    cfg = _config("fedavg", rounds=1, algorithm__personal_fraction=0.3)
    ctx, algorithm = build(cfg)
    splits = algorithm.personal
    assert list(algorithm.data.sizes + [len(t) for t in splits.tests]) == list(ctx.data.sizes)
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    [personal] = algorithm.callbacks(ctx)
    metrics = personal.after_round(RoundEnd(0, {}, [], ctx, algorithm, cfg=cfg))
    model = Flat(ctx).model
    by_hand = []
    for rows in splits.tests:
        logits = functional_call(model, algorithm.server, (ctx.data.x_train[rows],))
        by_hand.append((logits.argmax(-1) == ctx.data.y_train[rows]).double().mean().item())
    assert metrics["test_acc_personal_global"] == pytest.approx(sum(by_hand) / len(by_hand))
    assert metrics["test_acc_personal"] > metrics["test_acc_personal_global"]


@pytest.mark.parametrize("epochs", [0, 3])
def test_personalised_fine_tuning_is_plain_sgd_on_the_head(epochs):
    """Each client's copy after the evaluation's fine-tuning, one client at a time in float64:
    the body is the server's, the head (last layer) takes plain SGD steps (clip, weight decay,
    the round's lr) over its training share, for the round's 2 local steps (personal_epochs 0)
    or for personal_epochs epochs of ceil(n_i / B) steps."""
    ctx, algorithm = build(_config("fedavg", rounds=1, algorithm__personal_fraction=0.3,
                                   algorithm__personal_epochs=epochs))
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    play(algorithm, ctx, 1, ctx.schedule.at(1))
    tuned = algorithm.personal.tune(algorithm, ctx, 1)
    a, data, model = algorithm.cfg, algorithm.personal.data, Flat(ctx).model
    plan = (data.plan(ctx.seed, 1, a.batch_size, epochs) if epochs
            else algorithm.plan(ctx, 1, data))
    steps = 3 * -(-data.sizes // a.batch_size) if epochs else [2] * ctx.num_nodes
    assert list(plan.steps_of) == list(steps)
    lr = a.lr * a.lr_decay
    for i in range(ctx.num_nodes):
        params = {k: v.clone() for k, v in algorithm.server.items()}
        for k in range(steps[i]):
            rows = plan.ids[k, i, :plan.lengths[i, k]]
            head = {n: params[n].detach().requires_grad_() for n in ("fc3.weight", "fc3.bias")}
            logits = functional_call(model, params | head, (data.x_train[rows],))
            grads = torch.autograd.grad(F.cross_entropy(logits, data.y_train[rows]),
                                        list(head.values()))
            norm = torch.sqrt(sum(g.square().sum() for g in grads)).item()
            scale = min(1.0, a.clip_norm / (norm + CLIP_EPS))
            for (n, w), g in zip(head.items(), grads):
                params[n] = w.detach() - lr * (scale * g + a.weight_decay * w.detach())
        for n, v in params.items():
            torch.testing.assert_close(tuned[n][i], v, rtol=0, atol=1e-12)
        assert not torch.equal(params["fc3.bias"], algorithm.server["fc3.bias"])
    with pytest.raises(ConfigError, match="^algorithm.personal_epochs: fedavg fine-tunes only"):
        build(_config("fedavg", algorithm__personal_epochs=2))


def test_personalised_evaluation_needs_the_vectorized_executor():
    with pytest.raises(ConfigError, match="personal_fraction"):
        build(_config("fedavg", algorithm__personal_fraction=0.3, engine__executor="loop"))
