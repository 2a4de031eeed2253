"""Training configuration: YAML sections, overrides, clear errors naming the key."""

import pytest

from ddppo_hpc.config import ConfigError, from_dict, load_config


def test_defaults_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  num_envs: 8\n  backfill: conservative\nppo:\n  lr: 1.0e-3\n")
    config = load_config(path, ["ppo.lr=1e-4", "dist.preemption=false", "env.num_envs=32"])
    assert config.env.num_envs == 32 and config.env.backfill == "conservative"
    assert config.ppo.lr == 1e-4 and config.dist.preemption is False
    assert config.ppo.epochs == 4  # a default
    assert from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("ppo:\n  lrate: 0.1\n", [], r"c.yaml: unknown key 'ppo.lrate' \(known: updates"),
        ("optim:\n  lr: 0.1\n", [], r"c.yaml: unknown section 'optim'"),
        ("ppo: 3\n", [], r"c.yaml: section 'ppo' must hold keys"),
        ("", ["ppo.lr=fast"], r"command line: 'ppo.lr' must be float, not 'fast'"),
        ("", ["env.num_envs=2.5"], r"'env.num_envs' must be int, not 2.5"),
        ("", ["env.reward=speed"], r"'env.reward' must be one of bsld, wait"),
        ("", ["ppo.updates=0"], r"'ppo.updates' must be positive"),
        ("", ["dist.sync_frac=1.5"], r"'dist.sync_frac' and 'dist.min_rollout_frac'"),
        ("", ["lr=0.1"], r"override 'lr=0.1' is not section.key=value"),
        ("[1, 2]", [], r"c.yaml: expected sections"),
        ("", ["policy.name=gru"], r"'policy.name' must be one of mlp, attention, gtrxl"),
        ("", ["policy.memory=0"], r"'policy.memory' must be positive"),
        ("policy:\n  sect: maybe\n", [], r"c.yaml: 'policy.sect' must be bool, not 'maybe'"),
        (
            "",
            ["policy.name=gtrxl", "policy.heads=3"],
            r"'policy.hidden' \(32\) must be a multiple of 'policy.heads' \(3\)",
        ),
    ],
)
def test_errors_name_the_file_and_key(tmp_path, text, overrides, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, overrides)


def test_missing_file():
    with pytest.raises(ConfigError, match="nowhere.yaml: no such file"):
        load_config("nowhere.yaml")


def test_policy_keys():
    config = load_config(None, ["policy.name=gtrxl", "policy.sect=false", "policy.memory=8"])
    assert (config.policy.sect, config.policy.memory, config.policy.layers) == (False, 8, 1)
    assert load_config(None, ["policy.hidden=30"]).policy.hidden == 30  # mlp has no heads
