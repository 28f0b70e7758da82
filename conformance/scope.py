"""Which of TorchRL's test files are the conformance yardstick, grouped by area.

Paths are relative to TorchRL's ``test/`` folder (and to ``conformance/torchrl_tests/``).
``HELPERS`` are the files the test files import or that pytest loads (conftests);
``TESTING`` are TorchRL's ``torchrl/testing/*.py`` helpers, served as ``torchrl.testing``.
``OUT_OF_SCOPE_FILES`` says why the other TorchRL test files are not copied; tests inside an
in-scope file that are out of scope live in ``OUT_OF_SCOPE_TESTS`` (nodeid substring -> reason).
"""

from __future__ import annotations

BRANCH = "prepare-0.14"

AREAS: dict[str, list[str]] = {
    "specs": ["test_specs.py"],
    "envs": [
        "envs/test_auto_reset.py",
        "envs/test_env_base.py",
        "envs/test_model_based.py",
        "envs/test_nested.py",
        "envs/test_parallel.py",
        "envs/test_special.py",
        "envs/test_step_mdp.py",
        "libs/test_gym.py",
        "libs/test_dm_control.py",
        "test_custom_envs.py",
    ],
    "transforms": [
        "transforms/test_action_transforms.py",
        "transforms/test_clip_transform.py",
        "transforms/test_compose_and_env.py",
        "transforms/test_device_transforms.py",
        "transforms/test_encoder_transforms.py",
        "transforms/test_env_transforms.py",
        "transforms/test_key_transforms.py",
        "transforms/test_module_transforms.py",
        "transforms/test_normalization.py",
        "transforms/test_observation_transforms.py",
        "transforms/test_reward_transforms.py",
        "transforms/test_tensor_transforms.py",
        "transforms/test_timer_video.py",
    ],
    "buffers": [
        "rb/test_composable.py",
        "rb/test_ensemble.py",
        "rb/test_her.py",
        "rb/test_prioritized.py",
        "rb/test_query.py",
        "rb/test_rb_core.py",
        "rb/test_rb_transforms.py",
        "rb/test_samplers.py",
        "rb/test_storage_map.py",
        "rb/test_storages.py",
        "rb/test_writers.py",
        "test_postprocs.py",
    ],
    "objectives": [
        "objectives/test_dqn.py",
        "objectives/test_ddpg.py",
        "objectives/test_sac.py",
        "objectives/test_ppo.py",
        "objectives/test_mappo.py",
        "objectives/test_values.py",
        "objectives/test_loss_module.py",
        "objectives/test_bc.py",
        "objectives/test_cql.py",
        "objectives/test_iql.py",
        "objectives/test_dt.py",
    ],
    "modules": [
        "modules/test_actor.py",
        "modules/test_mlp_conv.py",
        "modules/test_multiagent_models.py",
        "modules/test_qvalue_actor.py",
        "modules/test_rnn.py",
        "modules/test_td_module.py",
        "modules/test_value_transforms.py",
    ],
    "collectors": ["test_collectors.py"],
    "exploration": ["test_exploration.py"],
    "distributions": ["test_distributions.py"],
    "llm": [
        "llm/test_conversions.py",
        "llm/test_data.py",
        "llm/test_llm_collectors.py",
        "llm/test_llm_envs.py",
        "llm/test_llm_objectives.py",
        "llm/test_llm_transforms.py",
        "llm/test_llm_updaters.py",
        "llm/test_wrapper.py",
        "llm/test_vllm.py",
        "llm/test_sglang.py",
        "llm/test_sglang_updaters.py",
        "llm/libs/test_mlgym.py",
    ],
}

HELPERS = [
    "conftest.py",
    "envs/_envs_common.py",
    "envs/conftest.py",
    "libs/conftest.py",
    "llm/conftest.py",
    "modules/_modules_common.py",
    "modules/conftest.py",
    "objectives/_objectives_common.py",
    "objectives/conftest.py",
    "rb/_rb_common.py",
    "rb/conftest.py",
    "transforms/_transforms_common.py",
    "transforms/conftest.py",
]

TESTING = [
    "__init__.py",
    "assertions.py",
    "env_creators.py",
    "env_helper.py",
    "gym_helpers.py",
    "llm_mocks.py",
    "mocking_classes.py",
    "modules.py",
    "mp_helpers.py",
    "ray_helpers.py",
    "utils.py",
]

OUT_OF_SCOPE_FILES: dict[str, str] = {
    "llm/test_vllm_plugin.py": "TorchRL's vLLM plugin (fp32 model overrides registered into vLLM, switched by an env var): no vLLM backend here (vLLM engines need a GPU); parametrized over that plugin's constant, so it cannot be collected without it",
    "llm/smoke_test_llm.py, llm/smoke_test_llm_deps.py": "TorchRL packaging smoke tests (import torchrl.envs.llm with vLLM / its optional dependencies)",
    "compile/*": "torch.compile of TorchRL internals; not part of the port contract",
    "services/*, test_inference_server.py, test_distributed.py": "TorchRL's service / RPC / distributed backends, not wrapped here",
    "rb/test_rb_distributed.py": "torch.distributed.rpc replay buffers, not wrapped here",
    "libs/test_brax.py, test_envpool.py, test_genesis.py, test_habitat.py, test_isaac.py, test_jumanji.py, test_libero.py, test_mjlab.py, test_mujoco_playground.py, test_multiagent.py, test_safety_gymnasium.py, test_torch_geometric.py, test_vmas.py, test_datasets.py, test_misc.py": "simulators / dataset libraries we do not wrap",
    "libs/test_mujoco.py": "TorchRL's own MujocoEnv wrapper API (rl-envs exposes MuJoCo through Gymnasium)",
    "objectives/test_act.py, test_controllers.py, test_diffusion_bc.py, test_dreamer.py, test_dreamer_v3.py, test_vla.py": "model-based, diffusion, action-chunking and VLA losses: not the loss target of issue 13",
    "modules/test_decision_transformer.py, test_dreamer_components.py, test_planners.py": "model-based and transformer models not in rl-modules",
    "transforms/test_video_transforms.py": "video decoding (torchcodec) transforms, not wrapped",
    "collectors/test_evaluator.py": "TorchRL's Evaluator (trainer machinery)",
    "test_trainer.py, test_configs.py, test_helpers.py, test_checkpoint.py, test_offline_to_online.py, test_loggers.py, test_render.py": "trainers, hydra configs, checkpointing, loggers, recorders: not wrapped",
    "test_utils.py": "TorchRL's private profiling / CUDA helpers (torchrl._utils)",
    "test_mcts.py, test_rnd.py, test_rlhf.py, test_benchmark_store_storage.py, test_shared.py": "features outside the packages' scope",
    "smoke_test*.py, test_setup.py, test_docstring_args_checker.py, data/test_vla.py": "TorchRL packaging / docs / VLA checks",
}

# Tests inside in-scope files that exercise TorchRL internals. Key: a substring of the nodeid.
OUT_OF_SCOPE_TESTS: dict[str, str] = {
    "test_specs.py::TestMPSDtype": "Apple MPS device",
    "envs/test_special.py::TestMPS": "Apple MPS device",
    "envs/test_special.py::TestParallelEnvMPSBuffers": "Apple MPS device",
    "envs/test_special.py::TestChessEnv": "TorchRL's chess environment (python-chess), not wrapped",
    "envs/test_special.py::TestAsyncEnvPool": "every test reads AsyncEnvPool's private _env_idx_key and calls its private _maybe_shutdown (a shutdown that swallows every error); the public API (env_index_key, async_*_send / recv routed by it, shutdown) is covered by rl-envs' test_batched_async_pool.py",
    "envs/test_parallel.py::TestLibThreading": "TorchRL's global torch-thread bookkeeping",
    "envs/test_auto_reset.py::TestAutoReset::test_native_auto_reset_": "sets TorchRL's private _torchrl_native_autoreset flag on a TransformedEnv (and reads private hooks such as Transform._reset_on_native_autoreset); the public route, SomeEnv(auto_reset=True) / AutoResetEnv, is covered by the test_auto_reset* tests",
    "envs/test_auto_reset.py::TestAutoReset::test_env_constructor_compile_kwarg": "checks TorchRL's private _compiled_step_and_maybe_reset cache in env.__dict__",
    "envs/test_step_mdp.py::TestStepMdp::test_step_class": "TorchRL's private cached step_mdp (_StepMDP); rl_envs has one step_mdp (issue #14)",
    "test_collectors.py::TestLibThreading": "TorchRL's global torch-thread bookkeeping",
    "test_collectors.py::TestCollectorGeneric::test_shared_mem_transport_logs_weight_sync": "checks the arguments of TorchRL's internal torchrl_logger.debug call (its log message format)",
    "test_collectors.py::TestPolicyFactory::test_update_weights[weight_updater]": "subclasses WeightUpdaterBase to drive TorchRL's private worker-pipe protocol (collector.pipes, the 'update' / 'updated' messages) for MPS weights",
    "test_collectors.py::TestCollectorProfiling": "TorchRL's profiling internals",
    "test_collectors.py::test_ray_weight_sync_copy_preserves_config_and_resets_runtime": "private state of TorchRL's Ray weight-sync scheme (_copy_uninitialized, _rendezvous_id)",
    "test_collectors.py::test_ray_weight_transport_uses_canonical_tensor_order": "TorchRL's private Ray weight-transport helpers (_weight_tensors, _weight_tensor_signature)",
    "test_collectors.py::test_missing_weight_update_path_raises": "TorchRL's private BaseCollector._maybe_fallback_update",
    "test_collectors.py::TestMakePolicyFactory::test_make_policy_factory_with_sequence_uses_worker_idx": "TorchRL's private collectors.utils._make_policy_factory",
    "test_collectors.py::TestCollectorGeneric::test_backend_dispatch[": "patches TorchRL's private module paths (collectors._multi_base, distributed.*) to intercept the dispatch",
    "test_collectors.py::TestCollectorGeneric::test_sequence_inference_and_options_are_not_mutated": "patches TorchRL's private Ray / distributed collector paths",
    "test_collectors.py::TestCollectorGeneric::test_concrete_default_divergences_are_pinned": "pins the signatures of TorchRL's RPC / distributed collectors (not wrapped)",
    "test_collectors.py::TestCollectorGeneric::test_context_backend_dispatch": "torchrl.service_backend global backend toggle",
    "test_collectors.py::TestCollectorGeneric::test_explicit_direct_backend_overrides_context": "torchrl.service_backend global backend toggle",
    "test_collectors.py::TestCollectorGeneric::test_process_backend_smoke_and_context_isolation": "torchrl.service_backend global backend toggle",
    "test_collectors.py::TestPreemptiveThreshold::test_interruptor_shared_memory": "TorchRL's private collectors._constants._Interruptor",
    "test_collectors.py::TestPreemptiveThreshold::test_sync_collector_interruptor_mechanism": "drives a Collector with TorchRL's private _Interruptor object",
    "test_collectors.py::TestCollectorRB::test_collector_with_rb_uses_lazy_stack": "patches TensorDictBase.update_at_ to check which copy routine TorchRL's lazy-stack write path takes (an internal optimisation; the stored frames are what the other TestCollectorRB tests check)",
    "test_collectors.py::TestAggregateReset": "TorchRL's private envs.utils._aggregate_end_of_traj",
    "test_collectors.py::TestTrajsPerBatch::test_ingest_": "TorchRL's private trajectory-assembly helpers (collectors.utils._traj_ingest)",
    "test_collectors.py::TestTrajsPerBatch::test_emit_": "TorchRL's private trajectory-assembly helpers (collectors.utils._traj_emit)",
    "test_collectors.py::TestTrajsPerBatch::test_chunk_ends_done_terminated": "TorchRL's private collectors.utils._traj_chunk_ends_done",
    "test_collectors.py::TestTrajsPerBatchReplayBuffer::test_replay_buffer_tensordict_device_metadata_": "TorchRL's private collectors.utils._maybe_normalize_replay_buffer_tensordict_device",
    "test_collectors.py::TestTrajsPerBatchReplayBuffer::test_replay_buffer_device_normalization_": "TorchRL's private replay-buffer device normalisation (storage._storage internals)",
    "test_custom_envs.py::TestToyVLAEnv": "vision-language-action env (VLA), not in scope",
    "transforms/test_action_transforms.py::TestActionTokenizerTransform": "LLM / VLA tokenizer",
    "transforms/test_key_transforms.py::TestTokenizer": "TorchRL's Tokenizer transform: rl_llm does not ship it yet (issue 30), and its default tokenizer downloads bert-base-uncased from the hub",
    "envs/test_auto_reset.py::TestNonTensorEnv::test_from_text_": "LLM tokenizer transform (Tokenizer, whose default downloads bert-base-uncased from the Hugging Face hub; rl-llm issue), as TestTokenizer",
    "test_custom_envs.py::TestPendulum::test_llm_hashing_env": "LLMHashingEnv: a token-chain text env hashed for MCTS forests (LLM / MCTS; rl-llm issue)",
    "transforms/test_encoder_transforms.py::TestR3M": "pretrained encoder weights from a hub",
    "transforms/test_encoder_transforms.py::TestVIP": "pretrained encoder weights from a hub",
    "transforms/test_encoder_transforms.py::TestVC1": "pretrained encoder weights from a hub",
    "transforms/test_module_transforms.py::TestRayModuleTransform": "TorchRL's Ray actor plumbing",
    "rb/test_samplers.py::TestPromptGroupSampler": "PromptGroupSampler (GRPO prompt groups): a replay-buffer sampler, so it belongs in rl-buffers, which does not ship it yet (issue 30)",
    "rb/test_storage_map.py::TestMCTSForest": "MCTS forest, not in scope",
    "rb/test_storage_map.py::TestTree": "MCTS tree, not in scope",
    "rb/test_query.py::TestReplayBufferQuery::test_query_matches_slice_sampler_boundaries": "calls TorchRL's private SliceSampler._get_stop_and_length (rl_buffers' SliceSampler.trajectories() is its API)",
    "rb/test_samplers.py::TestFindStartStopTraj::test_matches_slice_sampler": "TorchRL's private SliceSampler._find_start_stop_traj",
    "rb/test_samplers.py::TestFindStartStopTraj::test_boundary_index_": "TorchRL's private replay_buffers.utils._ReplayBoundaryIndex",
    "rb/test_samplers.py::TestFindStartStopTraj::test_boundary_distance_kernel_fullgraph": "TorchRL's private replay_buffers.utils._boundary_distances_1d",
    "rb/test_samplers.py::TestFindStartStopTraj::test_multidimensional_boundary_index_and_fullgraph": "TorchRL's private _ReplayBoundaryIndex / _boundary_distances_nd",
    "rb/test_samplers.py::TestFindStartStopTraj::test_subclass_end_to_start_stop_override": "overrides TorchRL's private SliceSampler._end_to_start_stop",
    "rb/test_samplers.py::TestFindStartStopTraj::test_slice_sampler_cache_uses_storage_revision": "TorchRL's private SliceSampler._get_stop_and_length and storage revision counter",
    "rb/test_storages.py::TestStorages::test__rand_given_ndim_recompile": "TorchRL's private storage._rand_given_ndim_impl",
    "rb/test_storages.py::TestStorages::test_compilable_storage_set_fullgraph": "TorchRL's private storage._mutation_revision counter",
    "rb/test_storages.py::TestSharedStorageInit::test_mutation_revision_shared_across_processes": "TorchRL's private storage._mutation_revision counter",
    "rb/test_storages.py::TestLazyStorages::test_init": "TorchRL's private LazyTensorStorage._init",
    "rb/test_rb_core.py::test_replay_buffer_prefetch_state_dict_waits_for_in_flight_samples": "polls TorchRL's private ReplayBuffer._futures_lock",
    "rb/test_rb_core.py::test_replay_buffer_load_state_dict_waits_for_in_flight_samples": "polls TorchRL's private ReplayBuffer._futures_lock",
    "modules/test_actor.py::TestVLAWrapperBase": "VLA policies, not in scope",
    "modules/test_actor.py::TestTinyVLA": "VLA policies, not in scope",
    "modules/test_actor.py::TestLeRobotPolicyWrapper": "LeRobot policies, not in scope",
    "test_distributions.py::TestLLMMaskedCategorical": "LLMMaskedCategorical: neither rl_llm nor rl_modules ships it yet (issue 30)",
    "transforms/test_compose_and_env.py::TestTransformedEnv::test_auto_unwrap_env_var_restored_on_exit": "checks that TorchRL mirrors its global auto-unwrap mode into the AUTO_UNWRAP_TRANSFORMED_ENV environment variable (and patches the private torchrl._utils._AUTO_UNWRAP): rl_envs' set_auto_unwrap_transformed_env is a contextvars scope and, as STYLE.md asks, reads and writes no environment variable",
    "modules/test_rnn.py::TestRecurrentMatmulPrecision": "TorchRL's process-global matmul-precision override for its Triton RNN backend (set/get_recurrent_matmul_precision, the TORCHRL_RNN_PRECISION env var, the private _rnn_precision helpers each test resets): STYLE.md forbids global modes and env-var defaults, and rl_modules' LSTM/GRU modules have no Triton backend",
    "objectives/test_loss_module.py::TestUtils::test_get_num_per_traj": "tests TorchRL's private value helpers objectives.value.utils._get_num_per_traj / _get_num_per_traj_init (rl_objectives' estimators handle trajectory boundaries inside their own functions)",
    "objectives/test_loss_module.py::TestUtils::test_split_pad_": "tests TorchRL's private value helpers objectives.value.utils._split_and_pad_sequence / _inv_pad_sequence",
    "objectives/test_loss_module.py::TestUtils::test_timedimtranspose_single": "tests TorchRL's private value.functional._transpose_time decorator",
    "objectives/test_loss_module.py::TestUtils::test_standardization": "tests TorchRL's private torchrl._utils._standardize",
    "objectives/test_loss_module.py::TestValueEstimatorRegistry::test_all_builtins_registered": "reads TorchRL's private objectives.utils._VALUE_ESTIMATOR_REGISTRY dict (rl_objectives.value.registry has register_value_estimator / build_value_estimator)",
    "objectives/test_loss_module.py::TestValueEstimatorRegistry::test_default_value_kwargs_": "patches TorchRL's private objectives.utils._VALUE_ESTIMATOR_REGISTRY dict",
    "objectives/test_loss_module.py::TestValueEstimatorRegistry::test_register_and_dispatch_custom_estimator": "reads and cleans TorchRL's private objectives.utils._VALUE_ESTIMATOR_REGISTRY dict",
    "objectives/test_loss_module.py::TestUtils::test_add_random_module": "add_random_module appends to TorchRL's process-global RANDOM_MODULE_LIST (the vmap-randomness registry of its losses): a global registry STYLE.md forbids; rl_objectives' losses take no vmap_randomness",
    "objectives/test_sac.py::TestREDQ::test_redq_deprecated_separate_losses": "TorchRL's deprecated REDQ implementation (torchrl.objectives.deprecated), not ported",
    "objectives/test_sac.py::TestREDQ::test_redq_batched": "compares REDQLoss with TorchRL's deprecated REDQ implementations, not ported",
    "objectives/test_sac.py::TestREDQ::test_redq_notensordict[True-": "the deprecated-REDQ half (deprec=True) of the test, not ported",
    "objectives/test_sac.py::TestREDQ::test_redq_reduction[True-": "the deprecated-REDQ half (deprecated_loss=True) of the test, not ported",
    # llm/* (issue 30): hub downloads, vLLM / SGLang engines, TorchRL internals
    "llm/test_conversions.py::": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline): every test's tokenizer fixture loads gpt2",
    "llm/test_data.py::TestHistory::test_assistant_mask_with_custom_templates": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_data.py::TestHistory::test_content_base": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_data.py::TestHistory::test_custom_template_equivalence": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_data.py::TestHistory::test_history_assistant_mask_llama": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_data.py::TestHistory::test_history_assistant_mask_qwen": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_data.py::TestHistory::test_history_round_trip": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (also test_history_round_trip_incomplete)",
    "llm/test_data.py::TestHistory::test_history_template": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (also test_history_template_recover)",
    "llm/test_data.py::TestHistory::test_assistant_mask_model_families": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (eight hub models, trust_remote_code)",
    "llm/test_data.py::TestHistory::test_add_chat_template_parameters_used": "reads TorchRL's private data.llm.history._CHAT_TEMPLATES registry",
    "llm/test_data.py::TestHistory::test_extract_responses_from_full_histories_batch_issue": "TorchRL's private policies.common._extract_responses_from_full_histories",
    "llm/test_llm_objectives.py::TestSFT::test_sft": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (facebook/opt-125m; also test_sft_assistant_only)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss[": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (facebook/opt-125m)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_zero_when_teacher_is_student": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_reduction_and_normalization": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_custom_teacher_key": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_assistant_only_mismatch_raises": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_missing_teacher_raises": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline)",
    "llm/test_llm_objectives.py::TestDistillation::test_distillation_loss_reduction_unit": "TorchRL's private objectives.llm.distillation._distillation_loss",
    "llm/test_llm_objectives.py::TestLosses::test_grpo[": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (the data helper tokenizes with Qwen/Qwen2.5-0.5B)",
    "llm/test_llm_objectives.py::TestLosses::test_kl_mask_threshold": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (the data helper tokenizes with Qwen/Qwen2.5-0.5B)",
    "llm/test_llm_objectives.py::TestLosses::test_failure_missing_entries": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (the data helper tokenizes with Qwen/Qwen2.5-0.5B)",
    "llm/test_llm_objectives.py::TestLosses::test_cispo": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (the data helper tokenizes with Qwen/Qwen2.5-0.5B)",
    "llm/test_llm_objectives.py::TestLosses::test_grpo_token_mean_expands_token_mask": "calls TorchRL's private GRPOLoss._aggregate_loss_value on a loss without actor",
    "llm/test_llm_objectives.py::TestMCAdvantage::test_mc_advantage_mixed_lazy_plain_trajectories_return_plain_tensordict": "reads TorchRL's private MCAdvantage._queue_list (the returned-TensorDict behaviour is covered by rl-llm's test_mc_advantage.py)",
    "llm/test_llm_objectives.py::TestMCAdvantage::test_mc_advantage_local_queues": "the TORCHRL_MC_ADVANTAGE_LOCAL_QUEUES environment-variable switch: STYLE.md forbids env-var modes (rl_llm's MCAdvantage shares only when share_memory_() is called)",
    "llm/test_llm_transforms.py::TestIncrementalTokenizer": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (gpt2)",
    "llm/test_wrapper.py::test_async_vllm_": "vLLM engine (AsyncVLLM prefix-cache plumbing, monkeypatched vLLM internals); vLLM is not installed and needs a GPU",
    "llm/test_wrapper.py::TestKLTransforms": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (Qwen/Qwen2.5-0.5B)",
    "llm/test_wrapper.py::TestPacking": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (Qwen/Qwen2.5-0.5B)",
    "llm/test_wrapper.py::TestPreferTokens": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (Qwen/Qwen2.5-0.5B)",
    "llm/test_wrapper.py::TestDistributionMethods::test_transformers_": "downloads a Hugging Face hub model or tokenizer (from_pretrained of a hub name); no network here (rl_llm.tiny builds models offline) (Qwen/Qwen2.5-0.5B)",
    "llm/test_llm_updaters.py::TestDoubleBufferPrefixCacheReset": "vLLM double-buffer weight receiver (vLLM engine, GPU)",
    "llm/test_sglang_updaters.py::": "SGLang NCCL weight-sync scheme (SGLang engine, GPU; private _process_group_options_kwargs)",
}

# Where each ``torchrl.*`` import path points. Longest prefix wins; sub-paths of a prefix are
# served by the same packages (``torchrl.data.replay_buffers.samplers`` -> rl_buffers).
# A sub-path that exists in the target package (``rl_objectives.value.functional``) is looked
# up first. ``only`` restricts which names a package contributes under that path.
IMPORT_MAP: dict[str, list[str]] = {
    # The root namespace (torchrl.set_auto_unwrap_transformed_env...) and torchrl._utils, where
    # TorchRL defines those names; exact paths only (ROOT_PATHS), never a prefix of the others.
    "torchrl": ["rl_envs", "rl_modules"],
    "torchrl.record": ["rl_envs"],  # VideoRecorder, TensorDictRecorder: transforms here
    "torchrl.record.loggers": ["rl_trainers"],  # DESIGN.md: torchrl.record.loggers -> rl_trainers
    "torchrl.envs": ["rl_envs", "rl_modules:exploration"],
    "torchrl.data": ["rl_buffers", "rl_envs:specs"],
    "torchrl.modules": ["rl_modules"],
    "torchrl.collectors": ["rl_collectors"],
    "torchrl.weight_update": ["rl_collectors"],
    "torchrl.objectives": ["rl_objectives"],
    "torchrl.objectives.llm": ["rl_llm"],  # DESIGN.md: torchrl.*.llm -> rl_llm
    "torchrl.envs.llm": ["rl_llm"],
    "torchrl.data.llm": ["rl_llm"],
    "torchrl.modules.llm": ["rl_llm"],
    "torchrl.collectors.llm": ["rl_llm"],
    "torchrl.weight_update.llm": ["rl_llm"],
}

ROOT_PATHS = frozenset({"torchrl", "torchrl._utils"})


def mapped_prefix(fullname: str) -> str | None:
    """The ``IMPORT_MAP`` key serving the module path ``fullname`` (longest prefix), or None.

    ``torchrl`` itself serves only ``ROOT_PATHS``: ``torchrl.trainers`` is not mapped by it.
    """
    if fullname in ROOT_PATHS:
        return "torchrl"
    candidates = [p for p in IMPORT_MAP if p != "torchrl"
                  and (fullname == p or fullname.startswith(p + "."))]  # fmt: skip
    return max(candidates, key=len, default=None)
