"""Training configuration: YAML sections, overrides, clear errors naming the key."""

import pytest

from ddppo_hpc.config import ConfigError, from_dict, load_config, resume_config


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
        ("", ["env.reward_scale=0"], r"'env.reward_scale' must be positive"),
        ("", ["ppo.lr=.inf"], r"command line: 'ppo.lr' must be a finite number, not inf"),
        ("", ["ppo.lr=.nan"], r"command line: 'ppo.lr' must be a finite number, not nan"),
        ("ppo:\n  clip: -.inf\n", [], r"c.yaml: 'ppo.clip' must be a finite number, not -inf"),
        (
            "",
            ["ppo.minibatches=1000", "env.num_envs=4", "ppo.rollout_steps=16"],
            r"'ppo.minibatches' \(1000\) must not exceed the fewest samples a rank holds in an "
            r"update, env.num_envs x ceil\(dist.min_rollout_frac x ppo.rollout_steps\), as "
            r"preemption may cut rollouts short: 4 x 4 = 16",
        ),
        (
            "",
            ["ppo.minibatches=65", "env.num_envs=4", "ppo.rollout_steps=16", "dist.preemption=no"],
            r"'ppo.minibatches' \(65\) .* env.num_envs x ppo.rollout_steps: 4 x 16 = 64",
        ),
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


def test_minibatches_up_to_the_fewest_samples():
    sizes = ["env.num_envs=3", "ppo.rollout_steps=16"]  # preempted: 3 x ceil(0.25 x 16) = 12
    assert load_config(None, [*sizes, "ppo.minibatches=12"]).ppo.minibatches == 12
    assert load_config(None, [*sizes, "ppo.minibatches=48", "dist.preemption=false"])


def test_resume_changes_only_what_a_checkpoint_can_take():
    saved = load_config(None, ["env.num_envs=4"]).to_dict()
    config = resume_config(saved, ["ppo.updates=600", "dist.sync_frac=0.5", "env.num_envs=4"])
    assert (config.ppo.updates, config.dist.sync_frac, config.env.num_envs) == (600, 0.5, 4)
    for key, value in (("env.num_envs", 8), ("policy.hidden", 64), ("data.trace", "x.swf")):
        with pytest.raises(ConfigError, match=f"'{key}' cannot change on --resume .* ppo.lr"):
            resume_config(saved, [f"{key}={value}"])


def test_unreadable_files_name_themselves(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(128, 256)))
    with pytest.raises(ConfigError, match="binary.yaml: not a YAML file"):
        load_config(binary)
    with pytest.raises(ConfigError, match=f"{tmp_path}: cannot read: is a directory"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match=r"command line: 'ppo.lr': '\[1' is not a YAML value"):
        load_config(None, ["ppo.lr=[1"])
