"""GTrXL + SECT: SECT and the gates start at (or near) the identity, the memory holds the
episode's last decisions and empties at episode ends, and PPO recomputes the rollout's
log-probabilities exactly from the stored memory."""

import pytest
import torch
from simhelpers import TINY_TRAINING

from ddppo_hpc.config import PolicyConfig, load_config
from ddppo_hpc.dist import context
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.policy import build_policy, decide
from ddppo_hpc.policy.gtrxl import SECT, GatedBlock
from ddppo_hpc.rl import ppo_loss
from ddppo_hpc.rl.ppo import masked_distribution
from ddppo_hpc.train import Trainer

MEMORY = 4


def observation(batch=3, slots=5):
    torch.manual_seed(0)
    mask = torch.ones(batch, slots, dtype=torch.bool)
    mask[1, 2:] = False
    return torch.rand(batch, slots, JOB_FEATURES), torch.rand(batch, CLUSTER_FEATURES), mask


def test_sect_starts_as_the_identity_and_scales_each_channel():
    jobs, cluster, mask = observation()
    sect = SECT()
    out_jobs, out_cluster = sect(jobs, cluster, mask)
    assert torch.equal(out_jobs, jobs) and torch.equal(out_cluster, cluster)
    # With the excitation's last layer set to constants c, the gates are 2 * sigmoid(c).
    c = torch.linspace(-2, 2, JOB_FEATURES + CLUSTER_FEATURES)
    with torch.no_grad():
        sect.excite[2].bias.copy_(c)
    gates = 2 * torch.sigmoid(c)
    out_jobs, out_cluster = sect(jobs, cluster, mask)
    assert torch.allclose(out_jobs, jobs * gates[:JOB_FEATURES])
    assert torch.allclose(out_cluster, cluster * gates[JOB_FEATURES:])


def test_sect_switch_removes_the_block():
    with_sect = build_policy(PolicyConfig("gtrxl", hidden=16, sect=True))
    without = build_policy(PolicyConfig("gtrxl", hidden=16, sect=False))
    extra = sum(p.numel() for p in SECT().parameters())
    assert without.sect is None
    count = [sum(p.numel() for p in m.parameters()) for m in (with_sect, without)]
    assert count[0] - count[1] == extra > 0


@pytest.mark.parametrize(("gate_bias", "bound"), [(2.0, 0.35), (8.0, 0.01)])
def test_gated_block_starts_near_the_identity(gate_bias, bound):
    # out - x = z * (h - x) with z = sigmoid(... - b_g): about 0.12 at b_g = 2, 3e-4 at 8.
    torch.manual_seed(1)
    x, past = torch.randn(8, 10, 32), torch.randn(8, MEMORY, 32)
    ignore = torch.zeros(8, MEMORY + 10, dtype=torch.bool)
    out = GatedBlock(32, 4, MEMORY, gate_bias)(x, past, ignore)
    assert ((out - x).norm() / x.norm()).item() < bound
    opened = GatedBlock(32, 4, MEMORY, -gate_bias)(x, past, ignore)  # gates open: no identity
    assert ((opened - x).norm() / x.norm()).item() > 0.5


def test_memory_is_a_queue_of_the_chosen_slots_candidates():
    jobs, cluster, mask = observation()
    policy = build_policy(PolicyConfig("gtrxl", hidden=16, memory=MEMORY, layers=2))
    memory = policy.initial_memory(3)
    assert memory.shape == (3, MEMORY, 2 * 16 + 1) and not memory.any()
    picks = [torch.tensor([0, 1, 4]), torch.tensor([2, 0, 3])]
    for step, actions in enumerate(picks, start=1):
        before = memory
        _, _, candidates = policy(jobs, cluster, mask, memory)
        _, _, _, memory = decide(policy, (jobs, cluster, mask), memory, lambda d, a=actions: a)
        assert torch.equal(memory[:, -1], candidates[torch.arange(3), actions])
        assert torch.equal(memory[:, :-1], before[:, 1:])
        assert memory[..., -1].sum(1).tolist() == [step] * 3  # entries marked present


@pytest.fixture(scope="module")
def trainer():
    """A size-1 gtrxl trainer after one rollout on 64-job episodes (several end within it)."""
    options = [*TINY_TRAINING, "policy.name=gtrxl", "policy.hidden=16", f"policy.memory={MEMORY}"]
    config = load_config(None, [*options, "ppo.rollout_steps=100"])
    trainer = Trainer(config, context.init("cpu"), run_dir=None)
    trainer.rollout()
    return trainer


def test_memory_resets_at_episode_boundaries(trainer):
    s = trainer.storage
    assert s.dones.sum() > 0  # episodes ended inside the rollout
    present = s.memory[..., -1].sum(-1)  # [T, B] entries in the memory a decision saw
    since = torch.zeros(s.used, s.dones.shape[1])  # decisions since the episode began
    for t in range(1, s.used):
        since[t] = (since[t - 1] + 1) * (1 - s.dones[t - 1])
    assert torch.equal(present, since.clamp(max=MEMORY))
    fresh = s.dones[:-1].bool()  # the step after an episode's end starts from nothing
    assert not s.memory[1:][fresh].any()


def test_update_recomputes_the_rollouts_log_probabilities(trainer):
    s = trainer.storage
    jobs, cluster, mask, actions = (s.flat(k) for k in ("jobs", "cluster", "mask", "actions"))
    with torch.no_grad():
        logits, _, _ = trainer.policy(jobs, cluster, mask, s.flat("memory"))
        forgetful, _, _ = trainer.policy(jobs, cluster, mask, torch.zeros_like(s.flat("memory")))
    recomputed = masked_distribution(logits, mask).log_prob(actions)
    assert torch.allclose(recomputed, s.flat("logprobs"), atol=1e-6)
    # Without the stored memory they differ: the memory is what makes them exact.
    without = masked_distribution(forgetful, mask).log_prob(actions)
    assert (without - s.flat("logprobs")).abs().max() > 1e-4
    # ppo_loss passes each sample's memory: at the rollout's parameters, ratios are all 1.
    batch = {k: s.flat(k) for k in ("jobs", "cluster", "mask", "actions", "logprobs", "memory")}
    batch.update(advantages=torch.randn(len(actions)), returns=torch.randn(len(actions)))
    _, stats = ppo_loss(trainer.policy, batch, clip=0.2, value_coef=0.5, entropy_coef=0.0)
    assert stats.approx_kl == pytest.approx(0, abs=1e-7) and stats.clip_fraction == 0
