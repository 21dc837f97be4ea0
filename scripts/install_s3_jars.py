"""Installs Hadoop's S3A jars for Spark, offline from PyPI (Maven may not be reachable).

PyPI's ``sagemaker-pyspark`` sdist (1.4.5, ~181 MB) carries ``hadoop-aws-3.3.1.jar`` and the
``aws-java-sdk-bundle-1.11.901.jar`` it was built against; pip downloads the sdist (never installs it:
its own jars would then sit on every Python path) and the two jars are extracted into the folder
maintenance/spark/session.py reads (``$ICELAKE_JARS_DIR``, else ``<venv>/share/icelake-jars``).
Nothing is downloaded when both jars are there. Run with the venv's Python: ``python scripts/install_s3_jars.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


def target() -> Path:
    return Path(os.environ.get("ICELAKE_JARS_DIR") or Path(sys.prefix) / "share" / "icelake-jars")


def main() -> int:
    folder = target()
    missing = [jar for jar in JARS if not (folder / jar).is_file()]
    if not missing:
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    print(f"bootstrap: extracting {', '.join(missing)} from PyPI {PACKAGE} into {folder}", flush=True)
    with tempfile.TemporaryDirectory(prefix="icelake-jars-") as tmp:
        # --no-deps: only the sdist; pip still prepares its metadata (a build env, seconds).
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", PACKAGE, "-d", tmp], check=True
        )
        sdists = sorted(Path(tmp).glob("sagemaker_pyspark-*.tar.gz"))
        if not sdists:
            print(f"bootstrap: pip downloaded no sdist of {PACKAGE}", file=sys.stderr)
            return 1
        with tarfile.open(sdists[0]) as archive:
            for member in archive:
                name = Path(member.name).name
                if name in missing and member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    partial = folder / (name + ".part")  # a killed extraction leaves no half jar
                    with source, open(partial, "wb") as out:
                        while chunk := source.read(1 << 20):
                            out.write(chunk)
                    partial.replace(folder / name)
    still = [jar for jar in JARS if not (folder / jar).is_file()]
    if still:
        print(f"bootstrap: {PACKAGE} has no {', '.join(still)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
