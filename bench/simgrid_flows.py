"""Completion times of transfers in SimGrid's flow-level network: the fixture that
tests/test_flows.py compares p2pfl.scale.flows with.

Run it with the Python that has SimGrid's bindings (Debian: `apt-get install python3-simgrid`,
SimGrid 3.32, for /usr/bin/python3); it imports nothing of p2pfl:

    /usr/bin/python3 bench/simgrid_flows.py tests/fixtures/simgrid_flows.json

Each scenario is a set of resources (links of a capacity in bit/s: a node's uplink or downlink,
an underlay link) and transfers (bytes, start time, the resources they cross). SimGrid runs it
with `network/model:CM02` (max-min sharing without TCP's latency and bandwidth factors),
`network/crosstraffic:0` (no acknowledgements on the reverse path) and `network/TCP-gamma:0`
(no window bound): a pure max-min fluid model. CM02 still weights a flow's share by its route's
latency (RTT unfairness), so every route of a scenario has the same latency (one link of that
latency and unlimited capacity per route), and the latency is above 0 (SimGrid's weight of a
zero-latency route is 0, which starves flows).
"""

from __future__ import annotations

import json
import random
import sys

GBIT = 1e9


def scenario(name: str, latency: float, capacity: dict[str, float],
             flows: list[tuple[str, str, float, float, list[str]]]) -> dict:
    """One scenario of the fixture.

    Parameters
    ----------
    name : what it tests.
    latency : every route's latency, seconds (> 0).
    capacity : {resource: bit/s}.
    flows : (src host, dst host, start s, bytes, resources crossed) per transfer.

    Returns
    -------
    dict, JSON-able.
    """
    return {"name": name, "latency_s": latency, "capacity_bps": capacity,
            "flows": [{"src": s, "dst": d, "start_s": t, "bytes": b, "route": r}
                      for s, d, t, b, r in flows]}


def access(n: int, up: float | list[float] = GBIT, down: float | list[float] = GBIT
           ) -> dict[str, float]:
    """Uplink and downlink resources of n nodes.

    Parameters
    ----------
    n : nodes.
    up, down : bit/s, one for all or one per node.

    Returns
    -------
    dict {"up<i>": bit/s, "down<i>": bit/s}.
    """
    ups = up if isinstance(up, list) else [up] * n
    downs = down if isinstance(down, list) else [down] * n
    return {**{f"up{i}": ups[i] for i in range(n)}, **{f"down{i}": downs[i] for i in range(n)}}


def pair(src: int, dst: int, start: float = 0.0, size: float = 8e5, *extra: str
         ) -> tuple[str, str, float, float, list[str]]:
    """A transfer src -> dst over src's uplink, the extra resources and dst's downlink.

    Parameters
    ----------
    src, dst : node numbers.
    start : seconds.
    size : bytes.
    *extra : underlay resources crossed between the two access links.

    Returns
    -------
    (src host, dst host, start, bytes, resources).
    """
    return (f"h{src}", f"h{dst}", start, size, [f"up{src}", *extra, f"down{dst}"])


def scenarios() -> list[dict]:
    """The fixture's scenarios (at least 20).

    Returns
    -------
    list of `scenario` dicts.
    """
    model = 796_840.0  # bytes of mnist_2NN in float32
    out = [scenario("one transfer", 0.005, access(2), [pair(0, 1, 0, model)])]
    for k in (2, 4, 8):
        out.append(scenario(f"fan-out to {k}", 0.001, access(k + 1),
                            [pair(0, j, 0, model) for j in range(1, k + 1)]))
    for k in (3, 6):
        out.append(scenario(f"incast of {k} to a server", 0.002, access(k + 1),
                            [pair(j, 0, 0, model) for j in range(1, k + 1)]))
    for n in (4, 6):
        out.append(scenario(f"all-to-all of {n}", 0.001, access(n),
                            [pair(i, j, 0, model) for i in range(n) for j in range(n)
                             if i != j]))
    out.append(scenario("ring of 8, both neighbours", 0.001, access(8),
                        [pair(i, (i + d) % 8, 0, model) for i in range(8) for d in (1, -1)]))
    out.append(scenario("directed ring of 6", 0.01, access(6),
                        [pair(i, (i + 1) % 6, 0, model) for i in range(6)]))
    out.append(scenario("fan-out, staggered starts", 0.001, access(5),
                        [pair(0, j, 0.002 * j, model) for j in range(1, 5)]))
    out.append(scenario("incast, staggered starts", 0.001, access(5),
                        [pair(j, 0, 0.004 * (4 - j), model) for j in range(1, 5)]))
    out.append(scenario("slow uplinks", 0.001, access(4, up=[GBIT, 0.1 * GBIT, 0.5 * GBIT, GBIT]),
                        [pair(i, j, 0, model) for i in range(4) for j in range(4) if i != j]))
    out.append(scenario("slow downlink, two senders", 0.001,
                        access(3, down=[0.2 * GBIT, GBIT, GBIT]),
                        [pair(1, 0, 0, model), pair(2, 0, 0, model), pair(1, 2, 0, model)]))
    out.append(scenario("unequal sizes from one node", 0.001, access(4),
                        [pair(0, 1, 0, 1e5), pair(0, 2, 0, 4e5), pair(0, 3, 0, 1.6e6)]))
    dumbbell = access(4) | {"core": 0.5 * GBIT}
    out.append(scenario("underlay bottleneck (dumbbell)", 0.002, dumbbell,
                        [pair(0, 2, 0, model, "core"), pair(1, 3, 0, model, "core"),
                         pair(0, 1, 0, model)]))
    out.append(scenario("underlay bottleneck, staggered", 0.002, dumbbell,
                        [pair(0, 2, 0, model, "core"), pair(1, 3, 0.003, model, "core"),
                         pair(1, 2, 0.001, model, "core")]))
    parking = access(5) | {f"l{k}": 0.4 * GBIT for k in range(3)}
    out.append(scenario("parking lot", 0.001, parking,
                        [pair(0, 4, 0, model, "l0", "l1", "l2"), pair(1, 2, 0, model, "l0"),
                         pair(2, 3, 0, model, "l1"), pair(3, 4, 0, model, "l2")]))
    star = access(6, down=[0.5 * GBIT] + [GBIT] * 5)
    out.append(scenario("star: server down and up", 0.005, star,
                        [pair(0, c, 0, model) for c in range(1, 6)]
                        + [pair(c, 0, 0.01 * c, model) for c in range(1, 6)]))
    out.append(scenario("tiny beside large", 0.001, access(3),
                        [pair(0, 1, 0, 1e3), pair(0, 2, 0, 8e6), pair(1, 2, 0.0005, 2e3)]))
    rng = random.Random(55)
    for case in range(4):
        n = 8
        caps = access(n, up=[rng.choice((0.1, 0.5, 1.0, 2.0)) * GBIT for _ in range(n)],
                      down=[rng.choice((0.1, 0.5, 1.0, 2.0)) * GBIT for _ in range(n)])
        caps |= {"u0": 0.8 * GBIT, "u1": 0.3 * GBIT}
        flows, paths = [], {}
        for _ in range(20):
            i, j = rng.sample(range(n), 2)
            extra = paths.setdefault((i, j), rng.choice(((), ("u0",), ("u1",), ("u0", "u1"))))
            flows.append(pair(i, j, round(rng.uniform(0, 0.02), 6),
                              float(rng.choice((1e5, 4e5, model, 2e6))), *extra))
        out.append(scenario(f"random {case}: 8 nodes, 20 transfers, 2 underlay links",
                            0.002, caps, flows))
    return out


def simulate(spec: dict) -> list[float]:
    """SimGrid's completion time of every transfer of a scenario.

    Parameters
    ----------
    spec : a `scenario`.

    Returns
    -------
    list of float, seconds, one per transfer.
    """
    from simgrid import Actor, Engine, LinkInRoute, Mailbox, NetZone, this_actor

    engine = Engine(["simgrid_flows", "--cfg=network/model:CM02",
                     "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0",
                     "--log=root.thres:critical"])
    zone = NetZone.create_full_zone("zone")
    names = sorted({f[k] for f in spec["flows"] for k in ("src", "dst")})
    hosts = {name: zone.create_host(name, 1e9) for name in names}
    links = {}
    for name, bps in spec["capacity_bps"].items():
        links[name] = zone.create_link(name, bps / 8)  # SimGrid counts bytes per second
        links[name].seal()
    routes = {}
    for k, flow in enumerate(spec["flows"]):
        key = (flow["src"], flow["dst"])
        if key in routes:
            if routes[key] != flow["route"]:
                raise SystemExit(f"{spec['name']}: two routes for {key}")
            continue
        routes[key] = flow["route"]
        wire = zone.create_link(f"latency{k}", 1e15)
        wire.set_latency(spec["latency_s"])
        wire.seal()
        zone.add_route(hosts[key[0]].netpoint, hosts[key[1]].netpoint, None, None,
                       [LinkInRoute(links[r]) for r in flow["route"]] + [LinkInRoute(wire)],
                       False)
    zone.seal()
    done = [0.0] * len(spec["flows"])

    def sender(k: int, size: int, start: float) -> None:
        this_actor.sleep_for(start)
        Mailbox.by_name(f"flow{k}").put(k, size)

    def receiver(k: int) -> None:
        Mailbox.by_name(f"flow{k}").get()
        done[k] = Engine.clock

    for k, flow in enumerate(spec["flows"]):
        Actor.create(f"send{k}", hosts[flow["src"]], sender, k, int(flow["bytes"]),
                     flow["start_s"])
        Actor.create(f"receive{k}", hosts[flow["dst"]], receiver, k)
    engine.run()
    return done


def main() -> None:
    """Write the fixture: `python3 bench/simgrid_flows.py OUT.json` (one SimGrid run a scenario,
    each in a fresh process: SimGrid allows one engine per process)."""
    import subprocess

    if len(sys.argv) == 3 and sys.argv[1] == "--one":  # the child: one scenario, JSON out
        print(json.dumps(simulate(json.loads(sys.argv[2]))))
        return
    from simgrid import simgrid_version

    out = {"simgrid": simgrid_version if isinstance(simgrid_version, str) else
           ".".join(map(str, simgrid_version)),
           "config": ["network/model:CM02", "network/crosstraffic:0", "network/TCP-gamma:0"],
           "scenarios": []}
    for spec in scenarios():
        result = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                                capture_output=True, text=True, check=True)
        spec["finish_s"] = json.loads(result.stdout.strip().splitlines()[-1])
        out["scenarios"].append(spec)
        print(f"{spec['name']}: {len(spec['flows'])} transfers, last at "
              f"{max(spec['finish_s']):.6f} s")
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
