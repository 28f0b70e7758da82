"""Decision Transformer, its actors and inference wrapper, and ACT's CVAE."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch.nn import functional as F

from rl_modules.sequence import (
    ACTModel,
    DecisionTransformer,
    DecisionTransformerInferenceWrapper,
    DTActor,
    OnlineDTActor,
)
from rl_modules.sequence.act import sinusoidal_positions

SMALL = DecisionTransformer.DTConfig(
    n_embd=16, n_layer=2, n_head=2, n_inner=24, n_positions=64, resid_pdrop=0.0, attn_pdrop=0.0
)


def windows(b: int = 3, t: int = 6, s: int = 4, a: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, t, s, generator=g), torch.randn(b, t, a, generator=g),
            torch.randn(b, t, 1, generator=g))  # fmt: skip


def test_matches_gpt2_with_copied_weights():
    """Our blocks are GPT-2's: the same embeddings through transformers' GPT2Model agree."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = DecisionTransformer(4, 2, SMALL).eval()
    gpt = transformers.GPT2Model(
        transformers.GPT2Config(
            n_embd=16,
            n_layer=2,
            n_head=2,
            n_inner=24,
            n_positions=64,
            activation_function="relu",
            resid_pdrop=0.0,
            attn_pdrop=0.0,
            embd_pdrop=0.0,
            vocab_size=1,
        )
    ).eval()
    ours = model.transformer
    with torch.no_grad():
        gpt.wpe.weight.copy_(ours.wpe.weight)
        gpt.ln_f.load_state_dict(ours.ln_f.state_dict())
        for blk, h in zip(ours.blocks, gpt.h, strict=True):
            h.ln_1.load_state_dict(blk.ln_1.state_dict())
            h.ln_2.load_state_dict(blk.ln_2.state_dict())
            # GPT-2's Conv1D stores weights as [in, out]
            h.attn.c_attn.weight.copy_(blk.attn.qkv.weight.T)
            h.attn.c_attn.bias.copy_(blk.attn.qkv.bias)
            h.attn.c_proj.weight.copy_(blk.attn.proj.weight.T)
            h.attn.c_proj.bias.copy_(blk.attn.proj.bias)
            h.mlp.c_fc.weight.copy_(blk.mlp[0].weight.T)
            h.mlp.c_fc.bias.copy_(blk.mlp[0].bias)
            h.mlp.c_proj.weight.copy_(blk.mlp[2].weight.T)
            h.mlp.c_proj.bias.copy_(blk.mlp[2].bias)
    obs, act, rtg = windows()
    with torch.no_grad():
        tokens = torch.stack(
            [model.embed_return(rtg), model.embed_state(obs), model.embed_action(act)], 2
        ).reshape(3, 18, 16)
        ref = gpt(inputs_embeds=model.embed_ln(tokens)).last_hidden_state
        ref = ref.reshape(3, 6, 3, 16)[:, :, 1]
        torch.testing.assert_close(model(obs, act, rtg), ref, atol=1e-5, rtol=1e-5)


def test_state_token_sees_no_future_and_not_its_own_action():
    torch.manual_seed(0)
    model = DecisionTransformer(4, 2, SMALL).eval()
    obs, act, rtg = windows()
    base = model(obs, act, rtg)
    act2 = act.clone()
    act2[:, 3] += 1.0  # a_3: state tokens 0..3 must not change, 4.. must
    out = model(obs, act2, rtg)
    torch.testing.assert_close(out[:, :4], base[:, :4])
    assert not torch.allclose(out[:, 4:], base[:, 4:])
    obs2 = obs.clone()
    obs2[:, 2] += 1.0  # s_2 is seen by its own token
    assert not torch.allclose(model(obs2, act, rtg)[:, 2], base[:, 2])


def test_batch_dims_flatten_consistently():
    torch.manual_seed(0)
    model = DecisionTransformer(4, 2, SMALL).eval()
    obs, act, rtg = windows(b=6)
    flat = model(obs, act, rtg)
    nested = model(obs.view(2, 3, 6, 4), act.view(2, 3, 6, 2), rtg.view(2, 3, 6, 1))
    torch.testing.assert_close(nested.reshape(6, 6, 16), flat)


def test_timestep_embedding():
    torch.manual_seed(0)
    cfg = {**SMALL.__dict__, "max_timestep": 50}
    model = DecisionTransformer(4, 2, cfg).eval()
    obs, act, rtg = windows()
    steps = torch.arange(6).expand(3, 6)
    a = model(obs, act, rtg, steps)
    torch.testing.assert_close(model(obs, act, rtg, steps.unsqueeze(-1)), a)
    assert not torch.allclose(model(obs, act, rtg, steps + 10), a)
    with pytest.raises(ValueError, match=r"timestep must have shape \(3, 6\)"):
        model(obs, act, rtg, steps[:, :5])
    with pytest.raises(ValueError, match="max_timestep is 0"):
        DecisionTransformer(4, 2, SMALL)(obs, act, rtg, steps)


def test_bad_inputs_name_the_expected_shape():
    model = DecisionTransformer(4, 2, SMALL)
    obs, act, rtg = windows()
    with pytest.raises(ValueError, match=r"observation must have shape \[\*batch, T, 4\]"):
        model(obs[..., :3], act, rtg)
    with pytest.raises(ValueError, match="share their"):
        model(obs, act[:, :5], rtg)
    with pytest.raises(ValueError, match="n_positions is 64"):
        model(*windows(t=30))
    with pytest.raises(TypeError, match="unknown DTConfig field"):
        DecisionTransformer(4, 2, {"n_embed": 8})


def test_actor_heads():
    torch.manual_seed(0)
    dt = DTActor(4, 2, SMALL).eval()
    obs, act, rtg = windows()
    torch.testing.assert_close(dt(obs, act, rtg),
                               F.linear(dt.transformer(obs, act, rtg), dt.action_layer.weight,
                                        dt.action_layer.bias))  # fmt: skip
    odt = OnlineDTActor(4, 2, SMALL).eval()
    for p in odt.action_layer_logstd.parameters():  # push the log-std to its limits
        p.data.mul_(1e3)
    with torch.no_grad():
        loc, scale = odt(obs, act, rtg)
    assert loc.shape == scale.shape == (3, 6, 2)
    assert (
        float(scale.min()) >= math.exp(-5.0) - 1e-6 and float(scale.max()) <= math.exp(2.0) + 1e-5
    )
    assert float(scale.min()) < math.exp(-4.9) and float(scale.max()) > math.exp(1.9)
    assert DTActor.default_config().n_embd == 512


def test_inference_wrapper_masks_shifts_and_keeps_the_last_step():
    torch.manual_seed(0)
    actor = TensorDictModule(DTActor(4, 2, SMALL).eval(), ["observation", "action", "return_to_go"],
                             ["action"])  # fmt: skip
    wrapper = DecisionTransformerInferenceWrapper(actor, inference_context=3)
    obs, act, rtg = windows(b=2, t=7)
    td = TensorDict(observation=obs, action=act, return_to_go=rtg, batch_size=[2])
    out = wrapper(td)
    # the reference: by hand, the newest 3 steps kept, actions moved one step earlier
    m_obs, m_rtg = torch.zeros_like(obs), torch.zeros_like(rtg)
    m_obs[:, 4:], m_rtg[:, 4:] = obs[:, 4:], rtg[:, 4:]
    m_act = torch.zeros_like(act)
    m_act[:, 4:6] = act[:, 5:7]
    expected = actor.module(m_obs, m_act, m_rtg)[:, -1]
    torch.testing.assert_close(out["action"], expected)
    torch.testing.assert_close(out["return_to_go"], rtg[:, -1])
    torch.testing.assert_close(out["observation"], obs)
    assert td["action"] is act and td["action"].shape == (2, 7, 2)  # input untouched
    # with the time dim inside the batch, it is dropped from the output
    out_t = wrapper(td.clone().auto_batch_size_(batch_dims=2))
    assert out_t.batch_size == (2,)
    torch.testing.assert_close(out_t["action"], expected)


def test_inference_wrapper_keys_and_errors():
    actor = TensorDictModule(DTActor(4, 2, SMALL), ["o", "a", "r"], ["pred"])
    with pytest.raises(ValueError, match="does not write 'action'"):
        DecisionTransformerInferenceWrapper(actor)
    actor = TensorDictModule(DTActor(4, 2, SMALL), ["o", "a", "r"], ["action"])
    wrapper = DecisionTransformerInferenceWrapper(actor).set_tensor_keys(
        observation="o", action="a", return_to_go="r"
    )
    assert wrapper.in_keys == ["o", "a", "r"]
    with pytest.raises(TypeError, match="unknown key name"):
        wrapper.set_tensor_keys(reward="x")
    obs, act, rtg = windows()
    with pytest.raises(ValueError, match="must share"):
        wrapper(TensorDict(o=obs, a=act[:, :5], r=rtg, batch_size=[3]))
    with pytest.raises(ValueError, match="inference_context must be >= 1"):
        DecisionTransformerInferenceWrapper(actor, inference_context=0)


def _small_act(**kw) -> ACTModel:
    args = dict(obs_dim=5, action_dim=2, chunk_size=4, hidden_dim=16, nheads=2,
                num_encoder_layers=1, num_decoder_layers=2, latent_dim=3, dropout=0.0)  # fmt: skip
    return ACTModel(**{**args, **kw})


def test_act_prior_at_inference_and_encoder_in_training():
    torch.manual_seed(0)
    model = _small_act().eval()
    obs = torch.randn(6, 5)
    pred, mu, log_var = model(obs)
    assert pred.shape == (6, 4, 2) and not mu.any() and not log_var.any()
    torch.testing.assert_close(model(obs)[0], pred)  # z = 0: deterministic
    chunk = torch.randn(6, 4, 2)
    _, mu1, lv1 = model(obs, chunk)
    _, mu2, _ = model(obs, chunk + 1.0)
    assert mu1.shape == lv1.shape == (6, 3) and not torch.allclose(mu1, mu2)
    # batch dims are flattened and restored
    torch.testing.assert_close(model(obs.view(2, 3, 5))[0], pred.view(2, 3, 4, 2))


def test_act_reparameterised_latent():
    """With a chunk, z = mu + exp(log_var / 2) eps: recomputed by hand from the same eps."""
    torch.manual_seed(0)
    model = _small_act().eval()
    obs, chunk = torch.randn(6, 5), torch.randn(6, 4, 2)
    torch.manual_seed(1)
    pred, mu, log_var = model(obs, chunk)
    torch.manual_seed(1)
    eps = torch.randn(6, 3)
    z = mu + (0.5 * log_var).exp() * eps
    obs_tok = model.obs_proj(obs).unsqueeze(1)
    memory = torch.cat([obs_tok, model.latent_out_proj(z).unsqueeze(1)], 1)
    queries = model.action_queries.weight.expand(6, 4, 16)
    ref = model.action_head(model.transformer_decoder(queries, memory))
    torch.testing.assert_close(pred, ref)


def test_act_errors_and_positions():
    model = _small_act()
    with pytest.raises(ValueError, match=r"observation must have shape \[\*B, 5\]"):
        model(torch.randn(6, 4))
    with pytest.raises(ValueError, match=r"action_chunk must have shape \(6, 4, 2\)"):
        model(torch.randn(6, 5), torch.randn(6, 3, 2))
    pe = sinusoidal_positions(5, 4)
    torch.testing.assert_close(pe[2], torch.tensor([math.sin(2), math.cos(2), math.sin(0.02),
                                                    math.cos(0.02)]))  # fmt: skip
    with pytest.raises(ValueError, match="even dim"):
        sinusoidal_positions(3, 5)
