"""PPO pieces: GAE by hand, masked sampling, the loss at the old policy, the policies."""

import math

import pytest
import torch

from ddppo_hpc.config import PolicyConfig
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.policy import build_policy
from ddppo_hpc.rl import gae, ppo_loss
from ddppo_hpc.rl.ppo import masked_distribution, teacher_cross_entropy


def test_gae_by_hand():
    rewards = torch.tensor([[0.0], [0.0], [1.0]])
    values = torch.tensor([[0.5], [0.5], [0.5]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    adv, returns = gae(rewards, values, dones, torch.tensor([0.7]), gamma=0.9, lam=0.8)
    # t=2 ends the episode: delta = 1 - 0.5. t=1: -0.05 + 0.72 * 0.5. t=0: -0.05 + 0.72 * 0.31.
    assert adv[:, 0].tolist() == pytest.approx([0.1732, 0.31, 0.5])
    assert returns[:, 0].tolist() == pytest.approx([0.6732, 0.81, 1.0])


def test_gae_bootstraps_from_the_last_value_and_cuts_at_episode_ends():
    rewards = torch.tensor([[2.0], [0.0]])
    values = torch.tensor([[1.0], [1.0]])
    dones = torch.tensor([[1.0], [0.0]])
    adv, _ = gae(rewards, values, dones, torch.tensor([3.0]), gamma=0.5, lam=1.0)
    # t=1 bootstraps: 0 + 0.5 * 3 - 1; t=0 ends an episode: 2 - 1, nothing from t=1.
    assert adv[:, 0].tolist() == pytest.approx([1.0, 0.5])


def test_masked_slots_are_never_sampled():
    logits = torch.tensor([[5.0, 0.0, 9.0, 1.0]]).expand(4000, -1)
    mask = torch.tensor([[True, True, False, True]]).expand(4000, -1)
    dist = masked_distribution(logits, mask)
    torch.manual_seed(0)
    assert (dist.sample() != 2).all()
    assert dist.probs[0, 2].item() == 0.0


def test_teacher_cross_entropy_by_hand():
    # Slots 0-2 are the teacher's, slot 3 the wait (left out); slot 1 masked in row 0.
    logits = torch.log(torch.tensor([[1.0, 5.0, 3.0, 4.0], [2.0, 1.0, 1.0, 4.0]]))
    mask = torch.tensor([[True, False, True, True], [True, True, True, True]])
    dist = masked_distribution(logits, mask)
    # row 0: the pick (slot 2) among slots 0 and 2: 3 / 4; row 1: slot 0 among 0-2: 2 / 4
    ce = teacher_cross_entropy(dist, mask, torch.tensor([2, 0]), 3)
    assert ce.item() == pytest.approx(-(math.log(3 / 4) + math.log(2 / 4)) / 2)
    # picks no valid teacher slot shows (-1, masked, the wait) count for nothing
    assert teacher_cross_entropy(dist, mask, torch.tensor([1, -1]), 3).item() == 0
    assert teacher_cross_entropy(dist, mask, torch.tensor([3, 0]), 3).item() == pytest.approx(
        -math.log(2 / 4)
    )


@pytest.mark.parametrize("name", ["mlp", "attention"])
def test_policies_score_slots_and_the_loss_at_the_old_policy(name):
    torch.manual_seed(0)
    policy = build_policy(PolicyConfig(name, hidden=16))
    jobs, cluster = torch.rand(6, 5, JOB_FEATURES), torch.rand(6, CLUSTER_FEATURES)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]] * 3)
    logits, values = policy(jobs, cluster, mask)
    assert logits.shape == (6, 5) and values.shape == (6,)
    with torch.no_grad():
        dist = masked_distribution(logits, mask)
        actions = dist.sample()
        batch = {
            "jobs": jobs,
            "cluster": cluster,
            "mask": mask,
            "actions": actions,
            "logprobs": dist.log_prob(actions),
            "advantages": torch.randn(6),
            "returns": torch.randn(6),
        }
        loss, stats = ppo_loss(policy, batch, clip=0.2, value_coef=0.5, entropy_coef=0.0)
    assert stats.approx_kl == pytest.approx(0, abs=1e-6) and stats.clip_fraction == 0
    assert stats.policy_loss == pytest.approx(-batch["advantages"].mean().item(), abs=1e-6)


def test_mlp_scores_do_not_depend_on_slot_order():
    torch.manual_seed(1)
    policy = build_policy(PolicyConfig("mlp", hidden=16))
    jobs, cluster = torch.rand(1, 4, JOB_FEATURES), torch.rand(1, CLUSTER_FEATURES)
    mask = torch.ones(1, 4, dtype=torch.bool)
    order = torch.tensor([2, 0, 3, 1])
    a, va = policy(jobs, cluster, mask)
    b, vb = policy(jobs[:, order], cluster, mask)
    assert torch.allclose(a[:, order], b) and torch.allclose(va, vb)
