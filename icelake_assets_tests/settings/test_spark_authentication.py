"""Issue 55 item 4: with a cluster master, Spark's driver, master and executors authenticate with a shared
secret from the environment (``spark.auth_secret: ${VAR}``); a cluster master without one is refused at
load unless ``spark.authenticate: false`` says so, and the secret is shown nowhere. The standalone
cluster's side: maintenance/spark/test_spark_cluster.py."""

import pytest

from icelake_assets.maintenance.spark.session import secret_spark_config, spark_config
from icelake_assets.settings import SettingsError, load_settings, redact_message
from icelake_assets_tests.settings.conftest import CAT, write

SECRET = "s3cr3t-of-the-spark-cluster-0123"


def _load(tmp_path, spark: str):
    return load_settings(write(tmp_path, CAT + "spark:\n" + spark))


@pytest.mark.parametrize(
    "spark",
    [
        "  master: spark://m:7077\n",
        # spark.config's master is the one Spark uses
        "  master: local[2]\n  config: {spark.master: 'spark://m:7077'}\n",
        "  master: mesos://m:5050\n",
    ],
)
def test_a_cluster_master_without_a_secret_is_refused_naming_the_setting_and_the_opt_out(tmp_path, spark):
    with pytest.raises(SettingsError) as err:
        _load(tmp_path, spark)
    message = str(err.value)
    assert "spark.auth_secret: " in message and "required with the cluster master" in message
    assert "${ICELAKE_SPARK_SECRET}" in message and "docs/scaling.md" in message
    assert "spark.authenticate: false" in message and "unsafe" in message


@pytest.mark.parametrize("master", ["local[2]", "local", "local[*]", "yarn", "k8s://https://api:6443"])
def test_no_secret_is_needed_where_spark_has_one_of_its_own(tmp_path, master):
    """Local executors live in the driver's JVM; YARN and Kubernetes make a secret per application."""
    conf = spark_config(_load(tmp_path, f"  master: '{master}'\n"))
    assert "spark.authenticate.secret" not in conf
    assert conf.get("spark.authenticate") == (None if master.startswith("local") else "true")


def test_the_secret_comes_from_the_environment_and_reaches_spark_only_at_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("ICELAKE_SPARK_SECRET", SECRET)
    settings = _load(tmp_path, "  master: spark://m:7077\n  auth_secret: ${ICELAKE_SPARK_SECRET}\n")
    conf = spark_config(settings)
    assert conf["spark.authenticate"] == "true" and conf["spark.authenticate.secret"] == SECRET
    # Resource config (kept by the UI and the run storage) shows authentication on, never the secret.
    public = spark_config(settings, include_secrets=False)
    assert public["spark.authenticate"] == "true" and SECRET not in repr(public)
    assert secret_spark_config(settings) == {"spark.authenticate.secret": SECRET}
    # Printed settings and errors that echo it hide it.
    assert SECRET not in repr(settings) and SECRET not in repr(settings.spark)
    assert redact_message(f"auth failed for {SECRET}") == "auth failed for ***"


def test_a_secret_in_spark_config_counts_and_the_users_value_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("S", SECRET)
    conf = spark_config(
        _load(tmp_path, "  master: spark://m:7077\n  config: {spark.authenticate.secret: '${S}'}\n")
    )
    assert conf["spark.authenticate"] == "true" and conf["spark.authenticate.secret"] == SECRET


def test_the_explicit_opt_out_runs_unauthenticated(tmp_path):
    conf = spark_config(_load(tmp_path, "  master: spark://m:7077\n  authenticate: false\n"))
    assert not any(k.startswith("spark.authenticate") for k in conf)


@pytest.mark.parametrize(
    "spark, expected",
    [
        # a literal secret is refused and not echoed
        (
            f"  master: spark://m:7077\n  auth_secret: {SECRET}\n",
            "spark.auth_secret: a literal secret is refused",
        ),
        (f"  master: spark://m:7077\n  auth_secret: '${{S:-{SECRET}}}'\n", "spark.auth_secret: a literal"),
        (
            "  master: spark://m:7077\n  auth_secret: ${SHORT}\n",
            "spark.auth_secret: .*at least 16 characters",
        ),
        (
            "  master: spark://m:7077\n  authenticate: false\n  auth_secret: ${S}\n",
            "spark.auth_secret: .*set while spark.authenticate is false",
        ),
        (
            "  master: spark://m:7077\n  auth_secret: ${S}\n  config: {spark.authenticate: 'false'}\n",
            r"spark.config: .*set spark.authenticate: false in the spark section",
        ),
    ],
)
def test_bad_authentication_settings_are_refused_without_showing_the_secret(
    tmp_path, monkeypatch, spark, expected
):
    monkeypatch.setenv("S", SECRET)
    monkeypatch.setenv("SHORT", "sh0rt-s3cret")
    with pytest.raises(SettingsError, match=expected) as err:
        _load(tmp_path, spark)
    assert SECRET not in str(err.value) and "sh0rt-s3cret" not in str(err.value)
