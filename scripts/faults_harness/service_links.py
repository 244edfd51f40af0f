"""The network fault kinds of the object store and the schema registry (``scripts/faults --network``):
``s3_blackhole`` (``--storage s3``) black-holes the S3 link during Spark's write or the commit's publish,
``registry_cut`` (``--avro``) cuts the schema registry at the plan or the read. Each is healed after a
few seconds or once the faulted try ended; the try must end within its bound, and a try that fails must
name the component (S3, the schema registry) in its error."""

from __future__ import annotations

from devstack.toxiproxy_api import both_ways
from faults_harness.bounded import Bounded, at_pause, bound_checked, during_read, held_for, links_of
from faults_harness.context import TrialError
from faults_harness.fault import Fault
from faults_harness.links import Links
from faults_harness.pipeline import Pipeline
from faults_harness.worker import PAUSE_ENV

S3_HOLD_S = (2.0, 5.0)
"""How long the S3 link stays black-holed (toxiproxy's ``timeout`` toxic, 0: nothing passes, nothing closed)."""
S3_BOUND_S = 150.0
"""A try whose S3 link was black-holed and healed must have ended by then (the S3 clients' socket timeouts
and retries, on a loaded machine)."""
REGISTRY_BOUND_S = 60.0
"""A try whose schema registry was cut (refused at once) must have ended by then."""
S3_MOMENTS = ("write", "publish")
REGISTRY_STEPS = ("plan", "read")
NAMES = {"s3": ("s3", "object", "bucket"), "schema_registry": ("schema registry", "schemaregistry")}
"""Words a failed try's error must hold to name the component whose link failed."""
BLAMES_CONNECT = "Next: check that the server runs and this worker reaches it"
"""The next step of a Spark Connect server that did not answer: wrong when another component's link failed."""


def names_component(error: str | None, proxy: str) -> bool:
    """Whether a failed try's error names ``proxy``'s component (S3, the schema registry)."""
    text = (error or "").lower()
    return any(word in text for word in NAMES[proxy])


def verdict(worker_ok: bool, error: str | None, proxy: str, must_fail: bool) -> str | None:
    """Why the faulted try's outcome is wrong, or None: it failed without naming the component (or sent the
    operator to another one), or it succeeded where it could not have (``must_fail``: nothing it needed could
    reach it)."""
    if worker_ok:
        return "the try should fail: nothing it needed was reachable" if must_fail else None
    if not names_component(error, proxy):
        return f"the try failed without naming {proxy.replace('_', ' ')}: {error}"
    if BLAMES_CONNECT in (error or ""):
        return f"the try blamed the Spark Connect server for the {proxy.replace('_', ' ')}'s link: {error}"
    return None


def _checked_naming(pipe: Pipeline, fault: Fault, bounded: Bounded, proxy: str, must_fail: bool) -> Fault:
    """``fault`` checked for its bound, then for its error naming ``proxy``'s component."""
    return bound_checked(pipe, fault, bounded, lambda w: verdict(w.ok, w.error, proxy, must_fail))


def _blackhole(links: Links, proxy: str, seconds: float) -> str:
    return held_for(
        links, seconds, lambda: links.add(proxy, both_ways("blackhole", "timeout", timeout=0)), f"{proxy} black-holed"
    )


def s3_blackhole(pipe: Pipeline) -> Fault:
    """The S3 link black-holed both ways for a few seconds, then healed: during the Spark attempt's write
    (Spark Connect's S3A client), or at the commit's publish (the sink's copy and manifest PUT, inside the
    ledger transaction). The try ends within its bound: it finishes, or fails naming S3; the batch is
    committed once."""
    if pipe.ctx.storage != "s3":
        raise TrialError("s3_blackhole black-holes the output's S3 link: run with --storage s3")
    links = links_of(pipe)
    moment = pipe.rng.choice(S3_MOMENTS)
    seconds = pipe.rng.uniform(*S3_HOLD_S)
    if moment == "write":

        def inject(links: Links) -> str:
            return _blackhole(links, "s3", seconds)

        fault, bounded = during_read(pipe, "S3 link black-holed during the Spark write", inject, S3_BOUND_S)
        return _checked_naming(pipe, fault, bounded, "s3", must_fail=False)
    # the publish: the commit task from its start, or the one-task form's try once Spark is done
    point = "after_spark" if pipe.ctx.form == "one-task" else "before_step"
    bounded = Bounded(S3_BOUND_S, "the S3 link was black-holed")
    env = {PAUSE_ENV: point}

    monitor = at_pause(
        links,
        point,
        bounded,
        lambda: links.add("s3", both_ways("blackhole", "timeout", timeout=0)),
        lambda: f"S3 link black-holed at the commit's publish for {seconds:.1f}s, then healed",
        hold_s=seconds,
    )
    fault = Fault("commit", env, monitor=monitor, description="S3 link black-holed at the publish")
    return _checked_naming(pipe, fault, bounded, "s3", must_fail=False)


def registry_cut(pipe: Pipeline) -> Fault:
    """The schema registry's link cut (the proxy disabled: connections closed, new ones refused) for the
    whole try of the plan (resolving the reader schema) or of the read (the writer schemas the decode
    fetches), healed once it ended. A plan must fail naming the registry (nothing planned); a read fails
    naming it or finishes with schemas it already had; the next try commits the batch once."""
    if not pipe.ctx.avro:
        raise TrialError("registry_cut cuts an Avro pipeline's schema registry: run with --avro")
    links = links_of(pipe)
    step = pipe.rng.choice(REGISTRY_STEPS)
    bounded = Bounded(REGISTRY_BOUND_S, "the schema registry was cut")
    env = {PAUSE_ENV: "before_step"}

    monitor = at_pause(
        links,
        "before_step",
        bounded,
        lambda: links.client.set_enabled("schema_registry", False),
        lambda: f"schema registry cut for the {step} try, healed {bounded.took:.1f}s later",
    )
    fault = Fault(step, env, monitor=monitor, description=f"schema registry cut at the {step}")
    return _checked_naming(pipe, fault, bounded, "schema_registry", must_fail=step == "plan")


SERVICE_KINDS = {"s3_blackhole": s3_blackhole, "registry_cut": registry_cut}
NEEDS = {"s3_blackhole": "--storage s3", "registry_cut": "--avro"}
"""What each kind needs besides ``--network``."""
