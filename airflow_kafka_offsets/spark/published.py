"""Which release of Spark's Kafka connector (and Avro module) a batch's spark-submit gets: one its Maven
repository serves.

``--packages`` makes spark-submit resolve the connector in Ivy, with the Spark artifact the connector's
POM brings at the same release (``spark-token-provider-kafka-0-10``), and only once the batch was
planned. A line's patch releases are not all served with both (Maven Central, Nov 2026:
``spark-token-provider-kafka-0-10_2.13`` has 4.0.0, 4.1.1 and 4.2.0 of the 4.x lines, not 4.0.1-4.0.4,
4.1.0 or 4.1.2; ``spark-avro_2.13`` lacks 4.0.3, 4.0.4, 4.1.0 and 4.1.2), and Spark keeps binary
compatibility within a line. So the package asks the repositories (each artifact's
``maven-metadata.xml``, a few seconds at most) which releases of the Spark's line serve every
artifact, and takes the Spark's own release when it is one of them, else the nearest one of the
line: the connector's before planning, Spark's Avro module's before an Avro batch's spark-submit.
When no repository answers, the releases known on Maven Central (:data:`KNOWN_RELEASES`) stand in;
when the line has none, the error names what to set.
"""

from __future__ import annotations

import functools
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from xml.etree import ElementTree

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark.versions import ClusterSpark
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    AVRO_ARTIFACT,
    CONNECTOR_ARTIFACT,
    spark_line,
    spark_release,
)

log = logging.getLogger(__name__)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
SPARK_GROUP = "org.apache.spark"
# The connector and the Spark artifact its POM declares at its own version (Spark 3.5 to 4.2).
CONNECTOR_ARTIFACTS = (CONNECTOR_ARTIFACT, "spark-token-provider-kafka-0-10")
AVRO_ARTIFACTS = (AVRO_ARTIFACT,)  # its dependencies are all in Spark's own jars
# spark-submit's own settings for where --packages come from: extra repositories, or Ivy settings
# that replace Spark's resolver chain (then the package does not second-guess it).
REPOSITORIES_CONF = "spark.jars.repositories"
IVY_SETTINGS_CONF = "spark.jars.ivySettings"
LOOKUP_TIMEOUT_S = 5.0
# artifacts -> (line, Scala) -> the releases Maven Central serves of all of them (their
# maven-metadata.xml, Nov 2026): what a lookup that gets no answer falls back on.
KNOWN_RELEASES: Mapping[tuple[str, ...], Mapping[tuple[str, str], tuple[str, ...]]] = {
    CONNECTOR_ARTIFACTS: {
        ("3.5", "2.12"): ("3.5.0", "3.5.1", "3.5.3", "3.5.7"),
        ("4.0", "2.13"): ("4.0.0",),
        ("4.1", "2.13"): ("4.1.1",),
        ("4.2", "2.13"): ("4.2.0",),
    },
    AVRO_ARTIFACTS: {
        ("3.5", "2.12"): ("3.5.0", "3.5.1", "3.5.2", "3.5.3", "3.5.4", "3.5.5", "3.5.6", "3.5.7", "3.5.9"),
        ("4.0", "2.13"): ("4.0.0", "4.0.1", "4.0.2"),
        ("4.1", "2.13"): ("4.1.1",),
        ("4.2", "2.13"): ("4.2.0",),
    },
}
_FINAL_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


def nearest_release(version: str, published: Iterable[str]) -> str | None:
    """The release of ``version``'s line in ``published`` closest to it (the release itself when
    there; between two equally close, the older); None when the line has none."""
    release = spark_release(version)
    line, patch = spark_line(release), int(release.rsplit(".", 1)[1])
    same_line = [v for v in set(published) if _FINAL_RELEASE.match(v) and spark_line(v) == line]
    if not same_line:
        return None
    return min(same_line, key=lambda v: (abs(int(v.rsplit(".", 1)[1]) - patch), int(v.rsplit(".", 1)[1])))


def metadata_versions(xml: bytes) -> set[str]:
    """The versions a ``maven-metadata.xml`` lists."""
    root = ElementTree.fromstring(xml)
    return {(v.text or "").strip() for v in root.iterfind("./versioning/versions/version")} - {""}


def repositories(conf: Mapping[str, str]) -> tuple[str, ...]:
    """Where spark-submit looks for --packages: ``spark.jars.repositories``, then Maven Central."""
    extra = [r.strip().rstrip("/") for r in conf.get(REPOSITORIES_CONF, "").split(",") if r.strip()]
    return (*extra, MAVEN_CENTRAL)


def shown(repository: str) -> str:
    """A repository URL fit for a message: without credentials in it."""
    parts = urllib.parse.urlsplit(repository)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@functools.cache
def served_versions(repository: str, artifact: str, timeout_s: float = LOOKUP_TIMEOUT_S) -> frozenset[str]:
    """The versions of ``org.apache.spark:<artifact>`` a repository lists; an artifact it does not
    have lists none. Raises OSError when the repository does not answer."""
    url = f"{repository}/{SPARK_GROUP.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return frozenset(metadata_versions(response.read()))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return frozenset()
        raise OSError(f"HTTP {exc.code}") from None
    except ElementTree.ParseError as exc:
        raise OSError(f"not a maven-metadata.xml ({exc})") from None


def artifact_releases(artifact: str, scala: str, repos: Sequence[str]) -> set[str]:
    """The versions one of ``repos`` serves ``org.apache.spark:<artifact>_<scala>`` at; OSError when one
    does not answer."""
    versions: set[str] = set()
    for repo in repos:
        try:
            versions |= served_versions(repo, f"{artifact}_{scala}")
        except OSError as exc:
            log.warning("Spark package lookup: %s did not answer (%s)", shown(repo), exc)
            raise
    return versions


def served_releases(artifacts: Sequence[str], scala: str, repos: Sequence[str]) -> set[str] | None:
    """The releases every one of ``artifacts`` (for Scala ``scala``) is served at by one of ``repos``;
    None when a repository did not answer."""
    try:
        return set.intersection(*(artifact_releases(a, scala, repos) for a in artifacts))
    except OSError:
        return None


def published_release(artifacts: Sequence[str], spark: ClusterSpark, conf: Mapping[str, str]) -> str:
    """The release of ``artifacts`` (Spark's, built for ``spark.scala``) spark-submit gets for ``spark``:
    see the module's docstring. Refused when the line has none served."""
    release: str = spark_release(spark.version)
    if conf.get(IVY_SETTINGS_CONF):
        return release  # the user's Ivy settings decide where packages come from
    repos = repositories(conf)
    served = served_releases(artifacts, spark.scala, repos)
    answered = served is not None
    where = ", ".join(shown(r) for r in repos)
    if served is None:
        served = set(KNOWN_RELEASES.get(tuple(artifacts), {}).get((spark.line, spark.scala), (release,)))
        where = f"Maven Central as of this package's release (no answer from {where})"
    chosen = nearest_release(release, served)
    names = " and ".join(f"{SPARK_GROUP}:{a}_{spark.scala}" for a in artifacts)
    if chosen is None:
        raise ConfigurationError(
            f"no release of the Spark {spark.line} line of {names} is served by {where}, so spark-submit "
            f"--packages cannot fetch it for {spark.describe()}: set spark_packages (or [kafka_offsets] "
            f"spark_packages) to coordinates your repository serves, spark_jars to the jars, or add a repository "
            f"that has them to spark_conf as {REPOSITORIES_CONF}"
        )
    if chosen != release:
        if answered:
            missing = [a for a in artifacts if release not in artifact_releases(a, spark.scala, repos)]
            what = " and ".join(f"{SPARK_GROUP}:{a}_{spark.scala}:{release}" for a in missing) + " not served"
        else:
            what = f"{names} not known to be served at {release}"
        log.warning(
            "Spark %s: %s by %s; using %s of the %s line, the nearest release served with %s (set spark_packages "
            "to choose another)",
            release,
            what,
            where,
            chosen,
            spark.line,
            "all of " + names if len(artifacts) > 1 else "it",
        )
    return chosen


def connector_release(spark: ClusterSpark, conf: Mapping[str, str]) -> str:
    """The release of the Kafka connector (and its token provider) spark-submit gets for ``spark``."""
    return published_release(CONNECTOR_ARTIFACTS, spark, conf)
