"""The suite's lanes. `python -m pytest` runs every test: the one check before a pull request, as CI
runs it. `python -m pytest -m "not slow"` is the fast lane to run while editing: every test but the
slow ones named here, which tests/conftest.py marks `slow` (registered in pyproject.toml, whose
`--strict-markers` refuses a marker that is not). Its time is in CONTRIBUTING.md.

Slow are the modules that start a Ray cluster, a browser, an install, agents on real frameworks,
the gate's calibration runs or a project of their own per module, and every test function that
took 2 s or more (its parameters together, setup included) in a full run on the project's two-core
machine under a load average of 5 to 8 (2026-12-07), each benchmark script among them. The tests
of the Python API (tests/test_api.py) and of the layering stay in: they are what an edit breaks
first. The fast lane keeps tests of every folder of the suite, and tests/test_suite_order.py fails
if it would not, or if an entry here names no test.
"""

from __future__ import annotations

SLOW_MODULES = (
    "tests/scoring/pages/test_dashboard_browser.py",
    "tests/scoring/pages/test_report_browser.py",
    "tests/scoring/pages/test_sticky_browser.py",
    "tests/scoring/pages/test_verdict_browser.py",
    "tests/simulator/cli/test_init.py",
    "tests/simulator/cli/test_real_frameworks.py",
    "tests/simulator/cli/test_second_agent.py",
    "tests/simulator/cluster/test_ray_executor.py",
    "tests/test_ci_workflow.py",
    "tests/test_gate_calibration.py",
    "tests/test_install.py",
    "tests/test_ledger_paths.py",
    "tests/test_same_after_the_move.py",
    "tests/test_stamina.py",
)

# module -> its slow test functions (every parameter of each)
SLOW_TESTS = {
    "tests/scoring/checks/test_dates_fast_path.py": (
        "test_dates_in_finds_what_the_patterns_find",
    ),
    "tests/scoring/checks/test_follow_fast_path.py": (
        "test_follow_finds_each_take_the_turns_show",
    ),
    "tests/scoring/checks/test_goal.py": (
        "test_the_scoring_package_imports_on_its_own",
    ),
    "tests/scoring/checks/test_goal_fast_paths.py": (
        "test_record_checks_decide_by_their_rule",
    ),
    "tests/scoring/checks/test_tally.py": (
        "test_tally_result_names_the_two_commonest_reasons",
    ),
    "tests/scoring/gate/test_gate.py": (
        "test_a_format_1_baseline_still_gates_and_says_flips_cannot_be_listed",
    ),
    "tests/scoring/gate/test_joint.py": (
        "test_joint_reassignment_holds_the_family_level",
    ),
    "tests/scoring/gate/test_paired.py": (
        "test_a_paired_a_a_of_a_reproduced_run_stays_quiet_and_lists_no_flip",
        "test_an_older_baseline_file_is_not_paired_and_a_format_6_one_keeps_the_seed",
        "test_the_paired_test_holds_alpha_under_within_pair_exchangeable_noise",
    ),
    "tests/scoring/gate/test_run_variation.py": (
        "test_a_a_with_a_run_by_cell_effect_stays_quiet_and_a_planted_regression_still_fails",
        "test_the_output_says_what_it_assumed_or_measured_and_lists_no_flips_across_runs",
    ),
    "tests/scoring/gate/test_seed.py": (
        "test_a_p_value_from_few_draws_holds_its_exact_rate_in_every_set_of_conversations",
    ),
    "tests/scoring/gate/test_sequential.py": (
        "test_looking_every_round_without_the_spending_exceeds_alpha_and_the_sequential_gate_does_not",
    ),
    "tests/scoring/gate/test_stats.py": (
        "test_max_t_holds_the_family_wise_rate_over_classes_and_slices",
        "test_on_sparse_cells_the_permutation_test_holds_its_level",
        "test_power_formula_matches_simulation",
    ),
    "tests/scoring/gate/test_whole_run.py": (
        "test_a_a_with_a_planted_whole_run_shift_stays_quiet_and_a_planted_regression_still_fails",
        "test_the_shift_is_measured_where_it_was_planted_and_not_elsewhere",
    ),
    "tests/scoring/pages/test_dashboard.py": (
        "test_a_database_carries_its_verdicts_to_a_dashboard_that_reads_it_elsewhere",
        "test_a_regression_is_failed_by_the_gate_and_an_aa_pair_is_not",
        "test_only_finished_whole_runs_are_judged_against",
        "test_stores_are_read_without_a_change_even_from_an_older_simrun",
        "test_the_top_line_judges_the_newest_run_of_each_dataset_against_the_baseline",
        "test_verdicts_are_judged_once_and_again_when_what_they_depend_on_changes",
    ),
    "tests/scoring/pages/test_own_verdicts.py": (
        "test_a_crafted_memory_is_held_to_its_types_and_its_text_is_escaped",
        "test_each_run_s_own_verdict_is_judged_once_then_remembered",
    ),
    "tests/scoring/pages/test_report.py": (
        "test_the_report_and_the_gate_always_agree",
    ),
    "tests/scoring/store/test_history.py": (
        "test_a_pull_request_is_gated_against_main_in_the_history_and_before_any_says_why_not",
        "test_the_dashboard_compares_a_pull_request_with_main_never_another_branch",
        "test_three_checkouts_keep_their_runs_in_a_bucket",
        "test_three_checkouts_keep_their_runs_in_one_folder",
        "test_with_run_history_set_simrun_keeps_each_finished_run_itself_and_a_shard_never",
    ),
    "tests/scoring/store/test_rates.py": (
        "test_the_wilson_interval_is_scipys",
    ),
    "tests/scoring/store/test_store.py": (
        "test_rates_count_unverifiable_apart_and_leave_out_simulator_errors",
        "test_transcripts_read_back_exactly_and_rescore_the_same",
    ),
    "tests/scoring/test_storable.py": (
        "test_a_stored_json_text_is_judged_as_walking_all_of_it_would",
    ),
    "tests/security/test_decoded_size.py": (
        "test_a_bad_bundle_costs_memory_in_proportion_to_its_size",
        "test_a_compressed_answer_is_bounded_by_its_decoded_size",
        "test_a_large_goal_file_costs_memory_in_proportion_to_its_size",
    ),
    "tests/security/test_files_and_databases.py": (
        "test_a_crafted_run_id_never_names_a_file_outside_the_reports_folder",
        "test_a_json_column_holding_no_json_is_one_line_naming_it",
        "test_a_malformed_bundle_is_one_line_and_leaves_no_run",
        "test_import_recomputes_the_dataset_hash_and_never_trusts_the_bundle",
        "test_merge_refuses_a_shard_holding_json_no_store_keeps",
        "test_merge_takes_shard_paths_as_data_never_as_sql",
    ),
    "tests/security/test_foreign_databases.py": (
        "test_no_command_that_reads_a_foreign_store_runs_or_quotes_it",
        "test_the_store_refuses_any_object_simrun_never_writes",
    ),
    "tests/security/test_gate_baseline.py": (
        "test_a_baseline_of_other_cells_is_compared_on_the_cells_it_shares_and_says_so",
        "test_a_stored_run_with_counts_beyond_its_repetitions_is_refused",
        "test_baseline_ref_errors_are_one_line",
        "test_baseline_ref_reads_the_protected_branch_not_the_working_tree",
    ),
    "tests/security/test_goal_sql.py": (
        "test_a_query_past_its_limit_on_one_store_answers_on_the_next_and_still_loads",
        "test_a_query_slow_only_on_real_data_is_unverifiable_never_a_pass_and_bounded_each_time",
        "test_a_runaway_query_is_stopped_at_its_limit_and_named",
    ),
    "tests/security/test_hostile_runtime.py": (
        "test_each_attack_costs_one_conversation_and_leaks_nothing",
    ),
    "tests/security/test_hostile_values.py": (
        "test_a_success_query_over_hostile_values_is_decided_or_unverifiable_for_its_goal",
        "test_hostile_values_in_a_runtime_s_answers_cost_one_conversation_on_every_kind",
    ),
    "tests/security/test_killed_simrun.py": (
        "test_a_runtime_that_starts_children_loses_them_too",
        "test_kill_9_of_simrun_leaves_no_runtime_process",
    ),
    "tests/security/test_least_privilege.py": (
        "test_a_descendant_that_left_the_group_ends_when_simrun_is_killed",
        "test_a_descendant_that_left_the_group_ends_with_the_runtime",
    ),
    "tests/security/test_model_answer_size.py": (
        "test_an_answer_past_the_bound_costs_the_call_not_the_memory_on_every_provider",
    ),
    "tests/security/test_one_door.py": (
        "test_no_module_clips_a_text_but_through_the_door",
    ),
    "tests/security/test_properties.py": (
        "test_any_mutated_bundle_loads_or_is_one_bundle_error",
        "test_every_check_reads_any_protocol_answer_without_failing",
    ),
    "tests/security/test_reply_scale.py": (
        "test_a_reply_with_100000_offers_never_holds_the_loop_past_the_bound",
        "test_the_report_embeds_a_bounded_amount_per_turn_whatever_the_reply",
    ),
    "tests/security/test_report_files.py": (
        "test_huge_store_values_leave_the_report_small",
    ),
    "tests/security/test_stored_settings.py": (
        "test_a_round_cap_of_a_trillion_ends_report_gate_and_dashboard_at_once_naming_the_run_and_field",
        "test_any_stored_sequential_setting_out_of_bounds_is_refused_as_budgets_toml_would_refuse_it",
    ),
    "tests/security/test_stuck_callable.py": (
        "test_in_a_thread_a_gil_holding_function_holds_the_timeout_until_it_returns",
        "test_in_a_worker_process_the_turn_ends_at_its_timeout_and_the_process_exits_within_timeout_and_grace",
        "test_simrun_itself_ends_each_stuck_conversation_as_runtime_error_and_exits",
    ),
    "tests/security/test_terminal_text.py": (
        "test_every_command_prints_data_as_text",
    ),
    "tests/security/test_trace_cost.py": (
        "test_a_decode_past_its_time_is_ended_and_refused_and_the_next_export_is_read",
        "test_spans_past_a_conversations_bound_refuse_the_export_and_leave_it_unknown_by_either_path",
        "test_two_million_empty_spans_in_4_mb_are_refused_off_the_loop_and_leave_the_conversation_unknown",
    ),
    "tests/security/test_trace_receiver.py": (
        "test_a_batch_sent_again_is_kept_once_and_other_signals_are_answered_unread",
        "test_a_request_too_large_once_decompressed_is_refused_and_costs_nothing",
        "test_a_turn_is_settled_when_the_runtimes_own_span_arrives_or_after_the_wait",
        "test_no_secret_sent_in_a_span_is_kept_and_huge_arguments_are_dropped",
        "test_one_bad_span_costs_that_span_and_a_bad_export_costs_that_export",
        "test_spans_of_no_turn_are_counted_and_ignored_and_a_turn_keeps_a_bounded_number",
    ),
    "tests/security/test_usage_errors.py": (
        "test_a_command_that_cannot_do_its_job_says_why_in_one_line",
    ),
    "tests/security/test_workflow_commands.py": (
        "test_a_hostile_goal_file_puts_no_command_on_the_ci_log_and_no_heading_in_the_summary",
    ),
    "tests/simulator/adapters/test_answer_bounds.py": (
        "test_an_answer_past_the_bound_costs_the_bound_on_every_path",
    ),
    "tests/simulator/adapters/test_callable_isolation.py": (
        "test_a_conversation_keeps_its_worker_and_a_later_one_reuses_it",
        "test_a_stuck_turn_ends_its_conversation_as_runtime_error_at_its_timeout",
        "test_a_workers_spans_reach_the_receiver_in_the_turns_trace",
        "test_an_exception_is_a_crash_and_a_stuck_turn_a_timeout_that_kills_its_worker",
    ),
    "tests/simulator/adapters/test_crash_evidence.py": (
        "test_a_chat_endpoint_that_fails_inside_a_request_and_stays_up_is_not_said_to_be_gone",
        "test_a_crash_names_its_exception_carries_its_traceback_and_says_what_happened",
        "test_simrun_show_and_the_report_show_the_traceback",
    ),
    "tests/simulator/adapters/test_dead_server.py": (
        "test_checks_that_could_not_run_because_the_runtime_was_gone_say_so",
        "test_each_conversation_in_flight_when_the_server_exits_says_so_with_its_own_stderr",
    ),
    "tests/simulator/adapters/test_fast_paths.py": (
        "test_as_json_answers_as_the_value_sent_over_http_would_be_read",
        "test_as_json_answers_as_the_value_sent_over_http_would_be_read_at_the_edges",
    ),
    "tests/simulator/adapters/test_foreign.py": (
        "test_a_body_template_is_filled_each_turn_and_the_reply_read_at_its_pointer",
        "test_a_function_gets_the_conversation_so_far_and_runs_in_the_turns_trace",
        "test_check_runtime_says_when_an_assistant_sends_no_span",
    ),
    "tests/simulator/adapters/test_foreign_agent.py": (
        "test_a_tool_calling_agent_is_judged_from_its_spans_as_a_callable",
        "test_check_runtime_names_the_rung_each_runtime_reaches",
        "test_the_same_agent_over_an_openai_compatible_endpoint_with_a_model_user",
    ),
    "tests/simulator/adapters/test_transports.py": (
        "test_a_finished_run_leaves_no_process_and_no_port",
        "test_a_protocol_that_is_not_a_number_is_named_as_the_runtime_s_mistake",
        "test_a_stdio_child_has_the_startup_timeout_for_its_first_answer_and_the_timeout_after",
        "test_conversations_a_dying_server_takes_down_with_it_are_marked_collateral",
        "test_conversations_that_find_the_server_dead_together_start_it_once_and_all_go_on",
        "test_ctrl_c_leaves_no_process_and_no_port",
        "test_every_runtime_fault_is_recorded_with_evidence_and_the_run_goes_on",
        "test_headers_come_from_the_environment_and_are_never_stored",
        "test_python_http_and_stdio_give_identical_transcripts_and_findings_with_the_store_sent_or_asked_for",
    ),
    "tests/simulator/cli/test_bless_runs_cli.py": (
        "test_several_runs_bless_into_one_baseline_the_gate_measures_their_variation",
    ),
    "tests/simulator/cli/test_blind_agent.py": (
        "test_goal_reached_is_shown_as_bounds_that_hold_the_truth_and_the_floor_is_not_checked",
    ),
    "tests/simulator/cli/test_cli.py": (
        "test_a_reader_that_goes_away_changes_nothing_about_the_run",
        "test_a_run_with_crashes_fails_the_release_check_and_says_which_criterion",
        "test_a_started_runtime_runs_in_the_folder_of_simrun_toml_whatever_the_shells",
        "test_show_lists_findings_by_class_with_conversations_and_session_ids",
        "test_the_main_command_runs_the_demo",
        "test_the_ray_executor_without_its_extra_is_one_line_saying_what_to_install",
        "test_validate_and_inspection_commands",
    ),
    "tests/simulator/cli/test_cli_model_user.py": (
        "test_a_paid_run_reports_its_exact_spend_and_the_plan_beside_it",
        "test_a_run_its_budget_cuts_short_is_warned_before_the_start_and_judged_incomplete",
        "test_check_user_measures_stores_and_every_report_of_that_model_shows_it",
    ),
    "tests/simulator/cli/test_dashboard_cli.py": (
        "test_dashboard_misuse_is_one_line",
        "test_labels_from_simrun_toml_and_the_flag_replacing_them",
        "test_the_dashboard_reads_several_databases_and_changes_none",
    ),
    "tests/simulator/cli/test_foreign_cli.py": (
        "test_a_function_and_its_tools_in_simrun_toml_are_all_it_takes",
    ),
    "tests/simulator/cli/test_gate_cli.py": (
        "test_a_baseline_records_who_played_the_user_and_another_user_is_refused_naming_both",
        "test_a_broken_guarantee_fails_the_gate",
        "test_a_planted_regression_exits_1",
        "test_bless_then_gate_passes_writing_markdown_junit_and_the_step_summary",
        "test_export_import_round_trip_scores_the_same",
        "test_import_text_only_items_and_refuse_unknown_goals",
        "test_misuse_is_one_line_and_exit_2",
        "test_one_goal_broken_outright_fails_the_gate_naming_it_and_the_report_shows_what_changed",
        "test_rescore_restores_the_scores_and_records_the_scorer_version",
    ),
    "tests/simulator/cli/test_project_imports.py": (
        "test_a_callable_beside_simrun_toml_imports_with_its_siblings_and_no_pythonpath",
    ),
    "tests/simulator/cli/test_sequential_cli.py": (
        "test_rounds_continue_one_run_undecided_is_inconclusive_and_a_broken_goal_fails_at_once",
    ),
    "tests/simulator/cli/test_tables.py": (
        "test_runs_and_plan_fit_100_columns_with_long_ids",
    ),
    "tests/simulator/cli/test_verdict_cli.py": (
        "test_a_pull_request_that_adds_a_goal_is_gated_on_what_it_shares",
        "test_a_run_is_judged_again_later_by_the_criteria_it_ran_with_unless_told_otherwise",
        "test_gate_baseline_may_name_a_blob_git_holds_and_a_bad_one_is_refused_before_anything_runs",
        "test_plain_simrun_gates_against_gate_baseline_an_aa_run_passes_and_a_regression_fails",
    ),
    "tests/simulator/cli/test_verdict_json_cli.py": (
        "test_every_surface_says_what_the_verdict_json_says_on_the_four_runs",
    ),
    "tests/simulator/test_check_runtime.py": (
        "test_after_a_server_dies_no_route_is_called_not_supported",
        "test_an_audit_sent_with_the_close_answer_that_is_not_the_audit_is_a_violation",
        "test_the_reference_runtime_passes_over_every_transport",
    ),
    "tests/simulator/test_check_user.py": (
        "test_a_check_stopped_by_sigterm_keeps_its_calls_and_conversations_and_resumes",
    ),
    "tests/simulator/test_goal_inline.py": (
        "test_a_large_store_is_checked_off_the_loop_even_when_its_answer_is_known",
    ),
    "tests/simulator/test_machine_load.py": (
        "test_a_query_past_its_limit_costs_its_conversation_and_the_next_one_is_checked",
        "test_the_same_run_quiet_and_under_a_cpu_hog_gives_the_same_verdict",
    ),
    "tests/simulator/test_one_client.py": (
        "test_only_the_one_client_sends_plain_http",
    ),
    "tests/simulator/test_plan_history.py": (
        "test_the_plan_from_history_is_within_30_percent_where_the_prior_is_not",
    ),
    "tests/simulator/test_progress.py": (
        "test_the_heartbeat_says_when_the_run_waits_on_a_rate_limit",
    ),
    "tests/simulator/test_runner.py": (
        "test_concurrency_does_not_change_what_is_recorded",
        "test_the_heap_is_frozen_during_a_run_and_a_callers_freeze_is_kept",
    ),
    "tests/simulator/users/test_model_users.py": (
        "test_replay_gives_identical_transcripts_at_no_cost_and_no_request",
        "test_simulator_faults_in_model_output_are_caught_by_code",
    ),
    "tests/simulator/users/test_user_dialects.py": (
        "test_a_slow_single_slot_server_needs_the_concurrency_hint",
    ),
    "tests/test_benchmarks.py": (
        "test_each_benchmark_runs_and_prints_its_figures",
    ),
    "tests/test_docs.py": (
        "test_a_broken_link_or_anchor_fails_the_build_and_is_counted",
        "test_the_site_builds_strictly_and_offline_with_no_warning",
    ),
    "tests/test_faults.py": (
        "test_each_fault_alone_at_30_percent_is_exact",
        "test_every_fault_at_once_at_5_percent_is_exact",
    ),
    "tests/test_no_private_attributes.py": (
        "test_a_private_name_of_another_package_is_found",
        "test_no_module_uses_a_private_name_of_another_package",
    ),
    "tests/test_one_name.py": (
        "test_each_package_imports_under_its_one_name",
        "test_every_package_refuses_a_second_name",
        "test_the_card_s_folders_do_not_import_from_a_checkout_s_root",
    ),
    "tests/test_python_api_page.py": (
        "test_every_python_block_of_the_page_runs_in_the_demo_project",
    ),
    "tests/test_simulator_faults.py": (
        "test_simulator_fault_is_caught_and_kept_apart",
    ),
    "tests/test_static.py": (
        "test_mypy_finds_nothing_in_the_package",
    ),
    "tests/test_suite_order.py": (
        "test_the_fast_lane_leaves_out_the_slow_tests_and_runs_the_rest",
    ),
}


def is_slow(nodeid: str) -> bool:
    """Whether the test of this pytest node id (`tests/x/test_y.py::test_z[param]`) is a slow one."""
    module, _, test = nodeid.partition("::")
    return module in SLOW_MODULES or test.split("[")[0] in SLOW_TESTS.get(module, ())
