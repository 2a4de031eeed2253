"""The per-job scoring MLP computes only the valid slots: each one's logit is its own slot
scored alone, the value reads the mean over the valid slots, and the invalid slots change
nothing."""

import torch

from ddppo_hpc.config import PolicyConfig
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.policy import build_policy


def observation():
    torch.manual_seed(0)
    mask = torch.tensor(
        [[True, False, True, True], [False, False, False, False], [False, True, False, False]]
    )
    return torch.rand(3, 4, JOB_FEATURES), torch.rand(3, CLUSTER_FEATURES), mask


def test_valid_slots_are_scored_one_by_one_and_pooled_for_the_value():
    policy = build_policy(PolicyConfig("mlp", hidden=8))
    jobs, cluster, mask = observation()
    logits, values = policy(jobs, cluster, mask)
    for b in range(3):
        valid = mask[b].nonzero()[:, 0].tolist()
        hidden = [policy.encode(torch.cat([jobs[b, k], cluster[b]])) for k in valid]
        for k in range(4):
            alone = policy.score(hidden[valid.index(k)]) if k in valid else torch.zeros(1)
            assert torch.allclose(logits[b, k], alone[0], atol=1e-6)
        mean = torch.stack(hidden).mean(0) if hidden else torch.zeros(8)  # no valid slot: 0
        value = policy.value(torch.cat([mean, cluster[b]]))
        assert torch.allclose(values[b], value[0], atol=1e-6)


def test_invalid_slots_do_not_matter_and_slot_order_permutes_the_logits():
    policy = build_policy(PolicyConfig("mlp", hidden=8))
    jobs, cluster, mask = observation()
    logits, values = policy(jobs, cluster, mask)
    noise = jobs + 100 * torch.rand_like(jobs) * (~mask).unsqueeze(-1)
    assert torch.equal(policy(noise, cluster, mask)[0], logits)
    order = torch.tensor([3, 0, 2, 1])
    shuffled, shuffled_values = policy(jobs[:, order], cluster, mask[:, order])
    assert torch.allclose(shuffled, logits[:, order], atol=1e-6)
    assert torch.allclose(shuffled_values, values, atol=1e-6)
