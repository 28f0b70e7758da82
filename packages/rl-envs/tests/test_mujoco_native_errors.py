"""Bad input to the native MuJoCo envs: clear errors, and the simulation left untouched."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("mujoco")

from rl_envs.mujoco import HalfCheetahEnv, MujocoEnv

BROKEN = """<mujoco>
  <worldbody>
    <geom type="spherex" size="1"/>
  </worldbody>
</mujoco>"""


class Task(MujocoEnv):
    def _compute_reward(self, prev, action, sim):
        return np.zeros(self.num_envs)


def test_malformed_mjcf_string_surfaces_the_compiler_error():
    with pytest.raises(
        ValueError, match=r"(?s)rejected the model given as an MJCF string.*spherex.*line 3"
    ):
        Task(BROKEN)


def test_malformed_mjcf_file_names_the_file(tmp_path):
    path = tmp_path / "broken_model.xml"
    path.write_text(BROKEN)
    with pytest.raises(ValueError, match=r"(?s)broken_model\.xml.*spherex"):
        Task(path)
    with pytest.raises(ValueError, match=r"broken_model\.xml"):
        Task(str(path))


def test_missing_file_and_missing_model():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Task("/no/such/model.xml")
    with pytest.raises(ValueError, match="has no model"):
        Task()
    with pytest.raises(TypeError, match=r"MJCF string, a path or a mujoco\.MjModel"):
        Task(123)
    with pytest.raises(ValueError, match=r"either model=\.\.\. or xml_path="):
        Task("<mujoco/>", xml_path="/a.xml")


def test_wrong_action_size_raises_before_stepping():
    env = HalfCheetahEnv(num_envs=2, seed=0, num_threads=1)
    td = env.reset()
    state = env.get_state()["physics"]["physics"].copy()
    td.set("action", torch.zeros(2, 5))
    with pytest.raises((ValueError, RuntimeError), match=r"action"):
        env.step(td)
    with pytest.raises(ValueError, match=r"expected \(2, 6\)"):
        env._step(td)  # the hook checks too (rollout's hot path skips the generic check)
    np.testing.assert_array_equal(env.get_state()["physics"]["physics"], state)


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_action_raises_and_leaves_the_state_untouched(bad):
    env = HalfCheetahEnv(num_envs=3, seed=0, num_threads=1)
    td = env.reset()
    before = env.get_state()
    action = torch.zeros(3, 6)
    action[1, 2] = bad
    with pytest.raises(ValueError, match=r"NaN or inf in env rows \[1\].*state is unchanged"):
        env.step(TensorDict(action=action, batch_size=[3]))
    after = env.get_state()
    np.testing.assert_array_equal(after["physics"]["physics"], before["physics"]["physics"])
    assert np.array_equal(after["t"], before["t"])
    # and the env goes on normally
    td.set("action", torch.zeros(3, 6))
    assert torch.isfinite(env.step(td)["next", "observation"]).all()


def test_unknown_backend():
    with pytest.raises(ValueError, match=r"Unknown physics backend 'bullet'; expected one of"):
        HalfCheetahEnv(backend="bullet")
    with pytest.raises(ValueError, match="MuJoCo Warp needs NVIDIA's `warp`"):
        HalfCheetahEnv(backend="warp")
    with pytest.raises(ValueError, match="TorchRL's default, a torch port"):
        HalfCheetahEnv(backend="mujoco-torch")


def test_missing_backend_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "jax" or m.startswith(("jax.", "mujoco.mjx"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax -> ImportError
    with pytest.raises(ImportError, match=r"rl-envs\[mjx\]"):
        HalfCheetahEnv(backend="mjx")


def test_set_state_from_another_env_is_refused():
    a = HalfCheetahEnv(num_envs=2, num_threads=1)
    b = HalfCheetahEnv(num_envs=3, num_threads=1)
    with pytest.raises(ValueError, match="num_envs"):
        b.set_state(a.get_state())
    with pytest.raises(ValueError, match="env_class='HalfCheetahEnv'"):
        Task("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>").set_state(a.get_state())


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        HalfCheetahEnv(num_envs=0)
    with pytest.raises(ValueError, match="frame_skip must be >= 1"):
        HalfCheetahEnv(frame_skip=0)
    env = HalfCheetahEnv(num_envs=2)
    with pytest.raises(ValueError, match=r"reset\(qpos=...\) got shape \(3, 9\)"):
        env.reset(qpos=torch.zeros(3, 9), qvel=torch.zeros(2, 9))


def test_rl_envs_imports_without_mujoco_and_the_env_names_the_extra():
    import subprocess

    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "import rl_envs\n"
        "try:\n"
        "    rl_envs.HalfCheetahEnv()\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'rl-envs[mujoco]'" in done.stdout


def test_unknown_sim_field_is_named():
    class Typo(Task):
        SIM_FIELDS = ("qpos", "qpoz")

    with pytest.raises(ValueError, match=r"\['qpoz'\], which are not mujoco\.MjData fields"):
        Typo("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")


def _cheetah(**kw):
    return HalfCheetahEnv(num_envs=2, seed=0, num_threads=1, **kw)


def test_step_before_reset_raises_and_set_state_lifts_it():
    env = _cheetah()
    with pytest.raises(RuntimeError, match=r"HalfCheetahEnv.step\(\) was called before reset"):
        env.step(TensorDict(action=torch.zeros(2, 6), batch_size=[2]))
    donor = _cheetah()
    root = donor.reset()
    env.set_state(donor.get_state())
    env.step(root.set("action", torch.zeros(2, 6)))


@pytest.mark.parametrize("name", ["qpos", "qvel"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_reset_with_non_finite_start_state_raises_naming_the_argument(name, bad):
    env = _cheetah()
    value = torch.zeros(2, 9)
    value[1, 0] = bad
    with pytest.raises(ValueError, match=rf"reset\({name}=...\): expected finite.*rows \[1\]"):
        env.reset(**{name: value})


def test_reset_with_unknown_keyword_raises():
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['qpso'\]"):
        _cheetah().reset(qpso=torch.zeros(2, 9))


def test_reset_with_non_numeric_start_state_raises():
    with pytest.raises(TypeError, match=r"reset\(qpos=...\): expected a float array"):
        _cheetah().reset(qpos="zeros")


def test_mj_warning_indices_are_the_ones_the_backend_reads():
    import mujoco

    from rl_envs.mujoco import _backend_mujoco as b

    w = mujoco.mjtWarning
    assert (
        int(w.mjWARN_BADQPOS),
        int(w.mjWARN_BADQVEL),
        int(w.mjWARN_BADQACC),
    ) == (b._BADQPOS, b._BADQVEL, b._BADQACC)


def test_diverged_simulation_raises_and_requires_a_reset():
    env = _cheetah()
    qvel = torch.zeros(2, 9)
    qvel[1] = 1e12  # finite but beyond mjMAXVAL: MuJoCo resets the data in mj_step
    td = env.reset(qvel=qvel)
    with pytest.raises(RuntimeError, match=r"env rows \[1\] diverged.*on_unstable='terminate'"):
        env.step(td.set("action", torch.zeros(2, 6)))
    with pytest.raises(RuntimeError, match=r"before reset"):
        env.step(td)
    td = env.reset()
    env.step(td.set("action", torch.zeros(2, 6)))  # a reset clears the counters


def test_diverged_simulation_terminates_its_episode_when_asked():
    env = _cheetah(on_unstable="terminate")
    qvel = torch.zeros(2, 9)
    qvel[0] = 1e12
    td = env.reset(qvel=qvel)
    with pytest.warns(UserWarning, match=r"env rows \[0\] diverged.*terminated=True"):
        td = env.step(td.set("action", torch.zeros(2, 6)))
    assert td["next", "terminated"].flatten().tolist() == [True, False]
    assert td["next", "done"].flatten().tolist() == [True, False]


def test_on_unstable_must_be_known():
    with pytest.raises(ValueError, match=r"on_unstable='ignore': expected one of"):
        _cheetah(on_unstable="ignore")


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
def test_huge_finite_action_raises_instead_of_an_infinite_reward():
    env = _cheetah()
    td = env.reset()
    before = env.get_state()
    action = torch.zeros(2, 6)
    action[0, 0] = 1e30
    with pytest.raises(ValueError, match=r"magnitude above 1e\+10.*rows \[0\].*unchanged"):
        env.step(td.set("action", action))
    np.testing.assert_array_equal(
        env.get_state()["physics"]["physics"], before["physics"]["physics"]
    )


def test_out_of_spec_finite_action_is_clipped_by_mujoco_and_warned_once():
    env = _cheetah()
    td = env.reset()
    with pytest.warns(UserWarning, match=r"outside its spec"):
        td = env.step(td.set("action", torch.full((2, 6), 5.0)))
    assert torch.isfinite(td["next", "reward"]).all()
