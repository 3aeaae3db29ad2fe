"""Mutation check of the suite: each entry of MUTANTS breaks one thing on purpose (a text replaced once in a file),
and the tests named beside it must then fail. A mutant that survives names a gap in the tests.

    python tests/test_mutants.py            # every mutant, in a copy of the tree (slow: each runs its tests)
    python tests/test_mutants.py K7 M2      # some, by their ids

pytest runs the one quick test below: every mutant still names text that occurs once in its file, so the table
follows the code it breaks.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = 'tests/test_model.py tests/test_generate.py'
KERNEL = 'tests/test_pope_kernel.py'
BOTH = f'{MODEL} {KERNEL}'
DECODE = f'{KERNEL} tests/test_generate.py'
LOSS = 'tests/test_ce_kernel.py tests/test_model.py'
GEN = 'tests/test_generate.py'
TRAIN = 'tests/test_train.py'
EVAL = 'tests/test_eval.py tests/test_reliability.py'
PRETRAINED = 'tests/test_pretrained.py'
GGUF = 'tests/test_gguf.py'
GGUF_LOGITS = f'{GGUF}::test_gguf_logits_equal_transformers'
PREP = 'tests/test_prepare.py'
INDIRECT = 'tests/test_indirect_data.py'
BATCHES = f'{TRAIN}::test_example_batch_targets {TRAIN}::test_stream_batch_targets_are_the_next_tokens'
STUDY = 'tests/test_linux_c_study.py'
SEEDS = 'tests/test_indirect_seeds.py'
REACH = 'tests/test_attention_reach.py'
PROBE = 'tests/test_indirect_probe.py'
PROBE_TABLE = f'{PROBE}::test_table_of_runs_and_of_their_groups'
CURVES = ('tests/test_eval.py::test_learning_curves_draw_one_panel_per_metric '
          'tests/test_eval.py::test_learning_curves_give_the_seeds_of_a_run_one_colour')
ZERO = ('tests/test_eval.py::test_adapter_loglikelihood '
        'tests/test_eval.py::test_zero_shot_scores_are_percent_and_a_group_the_mean_of_its_subtasks '
        'tests/test_eval.py::test_zero_shot_table_puts_ours_and_the_papers_side_by_side')
ABLATIONS = ('tests/test_eval.py::test_ablations_table_averages_the_seeds_of_each_run '
             'tests/test_eval.py::test_the_ablations_table_is_made_from_the_published_scores')
CONVERSION = 'tests/test_pretrained.py::test_conversion_table_is_made_from_the_published_runs'
T = f'{TRAIN}::test_'  # one test of test_train.py, the test that catches the mutant (the whole file is slow)
SAMPLE = 'tests/test_reliability.py::test_sample_prints_what_generate_draws_at_its_flags'
SAMPLE_ARGS = f'{T}sample_bad_arguments_exit_with_a_clear_message'
OWT_SPLIT = f'{PREP}::test_openwebtext_splits_the_documents_as_nanogpt'
OWT_SOURCE = f'{PREP}::test_openwebtext_reads_the_files_of_the_first_extension_in_source'
BAD_SOURCE = f'{PREP}::test_a_bad_source_is_one_line_and_writes_nothing'
PG19_LOCAL = f'{PREP}::test_pg19_local'
PG19_HUB = f'{PREP}::test_pg19_from_the_hub_takes_its_test_split_and_the_titles'

# (id, file, text, its replacement, the tests that must fail)
MUTANTS = [
    # model.py: PoPE's reference, the attention paths, the other encodings, the GPT
    ('M1', 'model.py', 'device=device) / d)', 'device=device) / (2 * d))', BOTH),
    ('M2', 'model.py', 'phi = phi - delta.to', 'phi = phi + delta.to', BOTH),
    ('M3', 'model.py', '1.0 / math.sqrt(q.shape[-1]) if', '1.0 / math.sqrt(2 * q.shape[-1]) if', BOTH),
    ('M4', 'model.py', 'q.shape[-2] <= pope_kernel.SHORT_T', 'q.shape[-2] >= pope_kernel.SHORT_T', MODEL),
    ('M5', 'model.py', 'return s[None, :] <= t[:, None]', 'return s[None, :] < t[:, None]', BOTH),
    ('M6', 'model.py', '        if causal:\n            att = att.masked_fill',
     '        if False:\n            att = att.masked_fill', BOTH),
    ('M7', 'model.py', "    att = att.masked_fill(~visible, float('-inf'))\n", '', MODEL),
    ('M8', 'model.py', 'mask = visible if bias is None else', 'mask = None if bias is None else', MODEL),
    ('M9', 'model.py', '(1 - gamma) * theta / yarn_scale + gamma * theta',
     'gamma * theta / yarn_scale + (1 - gamma) * theta', MODEL),
    ('M10', 'model.py', 'x1 * sin + x2 * cos', 'x1 * sin - x2 * cos', MODEL),
    ('M11', 'model.py', '2 ** (-8 * (i + 1) / h)', '2 ** (-8 * i / h)', MODEL),
    ('M12', 'model.py', 'return -self.slopes[:, None, None]', 'return self.slopes[:, None, None]', MODEL),
    ('M13', 'model.py', '= (pos * inv).sin(), (pos * inv).cos()', '= (pos * inv).cos(), (pos * inv).sin()', MODEL),
    ('M14', 'model.py', '0.1 * math.log(config.yarn_scale) + 1.0', '0.07 * math.log(config.yarn_scale) + 1.0',
     MODEL),
    ('M15', 'model.py', 'theta[len(theta) // 2:] = 0.0', 'theta[:len(theta) // 2] = 0.0', BOTH),
    ('M16', 'model.py', 'delta.clamp_(-2 * math.pi, 0.0)', 'delta.clamp_(-math.pi, 0.0)', 'tests/test_eval.py'),
    ('M17', 'model.py', 'uniform_(self.delta, -2 * math.pi, 0.0)', 'uniform_(self.delta, -math.pi, 0.0)', MODEL),
    ('M18', 'model.py', " and not n.endswith('delta')]", ']', MODEL),
    ('M19', 'model.py', 'attn = 6 * (qk_width + 1)', 'attn = 6 * qk_width', MODEL),
    ('M20', 'model.py', 'std=0.02 / math.sqrt(2 * config.n_layer)', 'std=0.02 / math.sqrt(config.n_layer)', MODEL),
    ('M21', 'model.py', "masked = logits.masked_fill(self.vocab_padding, float('-inf'))", 'masked = logits',
     MODEL),
    ('M22', 'model.py', 'pope_polar(q, input_pos, self.theta, self.delta, self.mu)',
     'pope_polar(q, input_pos, self.theta, None, self.mu)', MODEL),
    ('M23', 'model.py', "pope_polar(k, s, self.theta, mu='identity')", 'pope_polar(k, s, self.theta, mu=self.mu)',
     MODEL),
    ('M24', 'model.py', '(table[:T] if input_pos is None else table[input_pos])', 'table[:T]', MODEL),
    ('M25', 'model.py', 'return n - self.wpe.weight.numel() if non_embedding and self.wpe is not None else n',
     'return n', MODEL),
    ('M26', 'model.py', '.expand(-1, -1, n_head // x.shape[1], -1, -1).flatten(1, 2)',
     '.flatten(1, 2).repeat(1, n_head // x.shape[1], 1, 1)', BOTH),
    ('M27', 'model.py', "'relu': F.relu,", "'relu': F.leaky_relu,", BOTH),
    # pope_kernel.py: the prologue, the epilogue, the all-Triton attention, its bounds and checks
    ('K1', 'pope_kernel.py', 'sin_phi * cos_delta - cos_phi * sin_delta)', 'sin_phi * cos_delta + cos_phi * sin_delta)',
     KERNEL),
    ('K2', 'pope_kernel.py', 'dx = (dX * cos_phi + dY * sin_phi)', 'dx = (dX * cos_phi - dY * sin_phi)', KERNEL),
    ('K3', 'pope_kernel.py', 'g = mu * (dX * sin_phi - dY * cos_phi)', 'g = mu * (dX * sin_phi + dY * cos_phi)',
     KERNEL),
    ('K4', 'pope_kernel.py', '-(dtq.sum((0, 1, 2)) + dtk.sum((0, 1, 2)))', '-(dtq.sum((0, 1, 2)) - dtk.sum((0, 1, 2)))',
     BOTH),
    ('K5', 'pope_kernel.py', 'tl.where(x > 0.0, 1.0, 0.0)', 'tl.where(x >= 0.0, 1.0, 0.0)', KERNEL),
    ('K6', 'pope_kernel.py', 'tl.maximum(x, 0.0) + LN2 * log2_y', 'tl.maximum(x, 0.0) + log2_y', KERNEL),
    ('K7', 'pope_kernel.py', '(offs_s[None, :] <= q_offset + offs_m[:, None])',
     '(offs_s[None, :] < q_offset + offs_m[:, None])', KERNEL),
    ('K8', 'pope_kernel.py', 'alpha = tl.exp2(m_i - m_new)', 'alpha = tl.exp2(m_new - m_i)', KERNEL),
    ('K9', 'pope_kernel.py', 'q_offset, 0) // BLOCK_M * BLOCK_M  #', 'q_offset, 0) // BLOCK_M * BLOCK_M + BLOCK_M  #',
     KERNEL),
    ('K10', 'pope_kernel.py', '(dk * sm_scale).to(', 'dk.to(', KERNEL),
    ('K11', 'pope_kernel.py', '(acc * sm_scale).to(', 'acc.to(', KERNEL),
    ('K12', 'pope_kernel.py', 'pos[None, :Tk] <= pos[q_offset:', 'pos[None, :Tk] < pos[q_offset:', KERNEL),
    ('K13', 'pope_kernel.py', '(Tq > Tk, ', '(False, ', KERNEL),
    ('K14', 'pope_kernel.py', 'K += (b * (H // G) + h // G)', 'K += (b * (H // G) + h % (H // G))', KERNEL),
    ('K15', 'pope_kernel.py', 'dtype=torch.float64, device=theta.device)[:, None] * theta.double()',
     'dtype=torch.float32, device=theta.device)[:, None] * theta.float()', BOTH),
    ('K16', 'pope_kernel.py', 'tl.minimum((p0 + 1) // BLOCK_N', 'tl.minimum((p0 + BLOCK_M) // BLOCK_N', KERNEL),
    ('K17', 'pope_kernel.py', 'tl.minimum(Tk, p0 + BLOCK_M)', 'tl.minimum(Tk, p0 + BLOCK_M - 1)', KERNEL),
    ('K18', 'pope_kernel.py', 'q_offset, 0), BLOCK_M) * BLOCK_M  #', 'q_offset, 0), BLOCK_M) * BLOCK_M - BLOCK_M  #',
     KERNEL),
    ('K19', 'pope_kernel.py', 'tl.store(D + bh * Tq + offs_m, l_i,', 'tl.store(D + bh * Tq + offs_m, l_i * 0.0,',
     KERNEL),
    ('K20', 'pope_kernel.py', '    for g in range(G):\n', '    for g in range(1):\n', KERNEL),
    ('K21', 'pope_kernel.py', '_prologue_epilogue(q, qp, None, cos, sin, delta, None, None, q_offset, mu)',
     '_prologue_epilogue(q, qp, None, cos, sin, delta, None, None, 0, mu)', KERNEL),
    ('K22', 'pope_kernel.py', 'pos_g = (pos0 + t).to(tl.float32) * g', 'pos_g = t.to(tl.float32) * g', BOTH),
    # pope_decode.py: generation's one-token step
    ('D1', 'pope_decode.py', 'u = qc * cos_a + qs * sin_a', 'u = qc * cos_a - qs * sin_a', DECODE),
    ('D2', 'pope_decode.py', 'x = tl.where(keep, x, float("-inf"))', 'x = x', DECODE),
    ('D3', 'pope_decode.py', 'tl.load(L_IN + rows) * weight', 'tl.load(L_IN + rows)', DECODE),
    ('D4', 'pope_decode.py', 'n = tl.minimum(tl.load(N), L)', 'n = tl.load(N)', DECODE),
    ('D5', 'pope_decode.py', 'k = K + b * stride_kz + (h // G) * stride_kh',
     'k = K + b * stride_kz + (h % (H // G)) * stride_kh', DECODE),
    # ce_kernel.py: the training loss
    ('C1', 'ce_kernel.py', 'valid = (t >= 0) & (t < V)', 'valid = (t >= 0)', LOSS),
    ('C2', 'ce_kernel.py', 'g = tl.where(t >= 0, tl.load(DLOSS + row), 0.0)', 'g = tl.load(DLOSS + row)', LOSS),
    ('C3', 'ce_kernel.py', 'mask=cols < V, other=float("-inf")).to(tl.float32)\n    t =',
     'mask=cols < Vp, other=float("-inf")).to(tl.float32)\n    t =', LOSS),
    ('C4', 'ce_kernel.py', 'return loss.sum() / (targets != -1).sum()', 'return loss.mean()', LOSS),
    ('C5', 'ce_kernel.py', 'mask=cols < V, other=float("-inf")).to(tl.float32)\n        m_new',
     'mask=cols < V + 1, other=float("-inf")).to(tl.float32)\n        m_new', LOSS),
    # generate.py: sampling and the sliding window of absolute positions
    ('G1', 'generate.py', 'logits = logits.float() / temperature', 'logits = logits.float() * temperature', GEN),
    ('G2', 'generate.py', 'logits < v[:, [-1]]', 'logits < v[:, [0]]', GEN),
    ('G3', 'generate.py', 'return (p / -torch.rand_like(p).log()).argmax(-1)', 'return p.argmax(-1)', GEN),
    ('G4', 'generate.py', 'if n == T or n > max_len:', 'if n == T or n > max_len + 1:', GEN),
    # sample.py's flags, and the position of each token a step feeds through the cache
    ('G5', 'sample.py', 'temperature=args.temperature,', 'temperature=1.0,', SAMPLE),
    ('G6', 'sample.py', 'top_k=args.top_k, compile', 'top_k=None, compile', SAMPLE),
    ('G7', 'sample.py', 'torch.manual_seed(args.seed)', 'torch.manual_seed(1337)', SAMPLE),
    ('G8', 'sample.py', 'generate(model, x, args.max_new_tokens,', 'generate(model, x, args.max_new_tokens // 2,',
     SAMPLE),
    ('G9', 'generate.py', 'cache=cache, input_pos=input_pos)\n    input_pos += 1',
     'cache=cache, input_pos=input_pos + 1)\n    input_pos += 1',
     f'{GEN}::test_greedy_tokens_are_the_argmax_of_full_forward_passes'),
    # sample.py's arguments (generate.py's SAMPLE_CHECKS): an infinite temperature, an empty prompt
    ('G10', 'generate.py', "(lambda a: 0 < a.temperature < float('inf'),", '(lambda a: 0 < a.temperature,',
     SAMPLE_ARGS),
    ('G11', 'generate.py', "(lambda a: a.start != '',", '(lambda a: True,', SAMPLE_ARGS),
    # train.py: the schedule, accumulation, evaluation, checkpoints
    ('T1', 'train.py', 'learning_rate * (it + 1) / (warmup_iters + 1)', 'learning_rate * it / warmup_iters', TRAIN),
    ('T2', 'train.py', '0.5 * (1.0 + math.cos(math.pi * ratio))', '0.5 * (1.0 - math.cos(math.pi * ratio))', TRAIN),
    ('T3', 'train.py', '    if it > lr_decay_iters:', '    if it > lr_decay_iters + 1:', TRAIN),
    ('T4', 'train.py', 'scaler.scale(loss / len(ixs))', 'scaler.scale(loss)', TRAIN),
    ('T5', 'train.py', "sample_ix('train', iter_num * gradient_accumulation_steps + m)",
     "sample_ix('train', iter_num + m)", TRAIN),
    ('T6', 'train.py', 'loss_sum + loss.float() * n_tok, count + n_tok', 'loss_sum + loss.float() * 8, count + 8',
     TRAIN),
    ('T7', 'train.py', 'len(data[split]) - block_size, block_size)', 'len(data[split]) - block_size, block_size // 2)',
     TRAIN),
    ('T8', 'train.py', 'is_best, best_val_loss = val_loss < best_val_loss,', 'is_best, best_val_loss = True,', TRAIN),
    # train.py: final_weights, the last evaluation, the optimizer's groups, clip and rate
    ('T9', 'train.py', "        raw_model.load_state_dict(best['model'])\n", '',
     f'{T}final_scores_the_best_checkpoint_when_final_weights_is_best'),
    ('T10', 'train.py', '(iter_num % eval_interval == 0 or iter_num == max_iters)', '(iter_num % eval_interval == 0)',
     f'{T}loss_on_all_tokens_is_the_loss_that_trains'),
    ('T11', 'train.py', "decay_all=weight_decay_on == 'all'", 'decay_all=True',
     f'{T}delta_stays_in_range_and_trainable[ours]'),
    ('T12', 'train.py', 'clip_grad_norm_(model.parameters(), grad_clip)', 'clip_grad_norm_(model.parameters(), 1.0)',
     f'{T}micro_batches_give_the_gradient_of_their_whole_batch'),
    ('T13', 'train.py', "torch.is_tensor(group['lr']) else lr", "torch.is_tensor(group['lr']) else learning_rate",
     f'{T}the_learning_rate_warms_up_linearly_then_follows_a_cosine_to_min_lr'),
    ('T14', 'train.py', 'run.check_val_loss(val_loss, best_val_loss,', 'run.check_val_loss(val_loss, 1e9,',
     f'{T}a_run_is_never_lost'),
    ('T15', 'train.py', 'run.early_stop(early_stop_acc, early_stop_evals)', 'run.early_stop(early_stop_acc, 1)',
     f'{T}early_stop_ends_a_run_at_the_val_accuracy_threshold'),
    # configurator.py and checkpoint.py: the config's merge and checks, resume
    ('R1', 'configurator.py', 'val = float(val) if want is float and type(val) is int else val', 'val = val', TRAIN),
    ('R2', 'configurator.py', 'for k in POSITIVE if config[k] < 1]', 'for k in POSITIVE if config[k] < 0]', TRAIN),
    ('R3', 'configurator.py', '(lambda c: 0 <= c.dropout < 1,', '(lambda c: 0 <= c.dropout <= 1,', TRAIN),
    ('R4', 'configurator.py', "if k not in given | set(LOCAL)})", 'if k not in given})', TRAIN),
    ('R5', 'configurator.py', "'dataset', 'loss_on', 'example_order',", "'loss_on', 'example_order',", TRAIN),
    ('R6', 'configurator.py', 'return n_ctx // longest * longest, lengths, note', 'return n_ctx, lengths, note',
     f'{TRAIN} tests/test_quick_start.py'),
    ('R7', 'checkpoint.py', "    torch.set_rng_state(checkpoint['rng']['torch'].cpu())\n", '', TRAIN),
    ('R8', 'checkpoint.py', "    optimizer.load_state_dict(checkpoint['optimizer'])\n", '', TRAIN),
    # the run folder: resume's fixed model keys, divergence, early stop, the atomic save, the lock, Ctrl-C
    ('R9', 'configurator.py', 'fixed = [k for k in MODEL_KEYS if k not in LOCAL] + [', 'fixed = [',
     f'{T}resume_goes_on_with_the_checkpoints_config_and_refuses_other_data'),
    ('R10', 'checkpoint.py', 'val_loss > best_val_loss + divergence_margin',
     'val_loss > best_val_loss + 2 * divergence_margin',
     f'{T}the_divergence_check_and_early_stop_read_the_margin_and_the_last_evaluations'),
    ('R11', 'checkpoint.py', 'min(recent) >= acc', 'max(recent) >= acc',
     f'{T}the_divergence_check_and_early_stop_read_the_margin_and_the_last_evaluations'),
    ('R12', 'checkpoint.py', 'self.records[-evals:]', 'self.records[:evals]',
     f'{T}the_divergence_check_and_early_stop_read_the_margin_and_the_last_evaluations'),
    ('R13', 'checkpoint.py', "write(path + '.tmp')\n            os.replace(path + '.tmp', path)", 'write(path)',
     f'{T}a_failed_save_stops_with_one_line_and_keeps_the_last_checkpoint'),
    ('R14', 'checkpoint.py', '            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n', '',
     f'{T}a_busy_out_dir_stops_a_second_run'),
    ('R15', 'checkpoint.py', 'if self.saving and not self.signal_waiting:', 'if False:',
     f'{T}a_ctrl_c_just_after_ckpt_is_renamed_names_that_checkpoint'),
    ('R16', 'configurator.py', "resume_flags = [f'--{k}={config[k]}' for k in MACHINE if k in given]",
     'resume_flags = []', f'{T}ctrl_c_says_which_checkpoint_is_intact_and_how_to_go_on[2]'),
    # pretrained.py: GPT-2's and Llama's weights, a conversion to PoPE
    ('P1', 'pretrained.py', "CONV1D = ('attn.c_attn.weight', 'attn.c_proj.weight',", "CONV1D = ('attn.c_attn.weight',",
     PRETRAINED),
    ('P2', 'pretrained.py', '.transpose(1, 2).reshape(w.shape)', '.reshape(w.shape)', GGUF),
    ('P3', 'pretrained.py', "new['pope_delta'] = 'zero'", "new['pope_delta'] = 'uniform'", PRETRAINED),
    ('P4', 'pretrained.py', "pos_base=float(llama('rope.freq_base') or 1e4)", 'pos_base=1e4', GGUF),
    ('P5', 'pretrained.py', "GELU = {'gelu_new': 'tanh'", "GELU = {'gelu_new': 'none'", PRETRAINED),
    ('P6', 'pretrained.py', "Hkv, tensors = llama('attention.head_count_kv') or H,", 'Hkv, tensors = H,', GGUF_LOGITS),
    ('P7', 'pretrained.py', 'unpermute(k, Hkv)', 'unpermute(k, H)', GGUF_LOGITS),
    ('P8', 'pretrained.py', "norm_eps=float(llama('attention.layer_norm_rms_epsilon') or 1e-5)", 'norm_eps=1e-5',
     GGUF_LOGITS),
    ('P9', 'pretrained.py', 'F.pad(wte if head is None else head,', 'F.pad(wte,', f'{GGUF_LOGITS}[untied]'),
    ('P10', 'pretrained.py', '(0, 0, 0, -V % 64))', '(0, 0, 0, -V % 32))', GGUF_LOGITS),
    ('P11', 'pretrained.py', 'torch.cat([gate, up])', 'torch.cat([up, gate])', GGUF_LOGITS),
    ('P12', 'pretrained.py', 'if llama(k) not in (None, ok)]', 'if llama(k) not in (None, ok, llama(k))]',
     f'{GGUF}::test_gguf_refusals'),
    ('P13', 'pretrained.py', 'if head is not None and wte is not None and not torch.equal(head, wte):', 'if False:',
     f'{PRETRAINED}::test_a_head_untied_from_the_embedding_is_refused'),
    ('P14', 'pretrained.py', "old['wpe.weight'] = old['wpe.weight'][:n]", "old['wpe.weight'] = old['wpe.weight'][-n:]",
     f'{PRETRAINED}::test_a_shorter_context_keeps_gpt2s_first_positions'),
    ('P15', 'pretrained.py', 'if sizes != GPT2_MODELS[init_from]:', 'if False:',
     f'{PRETRAINED}::test_gpt2_by_name_is_fetched_from_the_hub_and_checked_against_its_sizes'),
    # eval/: the windows of the extrapolation and context losses, frequency usage
    ('E1', 'eval/__init__.py', 'tokens[1:m + 1].view(-1, L)', 'tokens[:m].view(-1, L)', 'tests/test_quick_start.py'),
    ('E2', 'eval/frequency_usage.py', 'x[..., n:2 * n] ** 2', 'x[..., 1:n + 1] ** 2', EVAL),
    ('E3', 'eval/frequency_usage.py', 'm.double().mean(2).sum((0, 1))', 'm.double().sum(2).sum((0, 1))', EVAL),
    ('E4', 'eval/extrapolation.py', '* (full < longest)', '* 0', EVAL),
    ('E5', 'eval/extrapolation.py', 'data[1:].view(n, L))] if n', 'data[:-1].view(n, L))] if n', EVAL),
    ('E6', 'eval/extrapolation.py', 'if b - a > longest]', 'if b - a >= longest]', EVAL),
    ('E7', 'eval/extrapolation.py', "if trained_yarn else model_args['block_size']", '', EVAL),
    # eval/: attention reach's heads and tasks, the learning curves' colours, the indirect probe, zero-shot scores
    ('E8', 'eval/attention_reach.py', 'att = a.detach().softmax(-1)', 'att = a.detach()', REACH),
    ('E9', 'eval/attention_reach.py', 'T - 2 - torch.arange(n)', 'T - 1 - torch.arange(n)', REACH),
    ('E10', 'eval/attention_reach.py', 'letters.argsort()', 'letters', REACH),
    ('E11', 'eval/learning_curves.py', "group = label.rsplit(' ', 1)[0]", 'group = label', CURVES),
    ('E12', 'eval/indirect_probe.py', 'np.std(accs, ddof=1)', 'np.std(accs)', PROBE_TABLE),
    ('E13', 'eval/indirect_probe.py', 'attention_to(maps, g[qn], k)) * len(x)', 'attention_to(maps, g[qn], k))', PROBE),
    ('E14', 'eval/indirect_probe.py', "logits[b, g['q_last']].argmax(-1)", "logits[b, g['q_last'] - 1].argmax(-1)",
     PROBE),
    ('E15', 'eval/indirect_probe.py', "pct(max(r['test_acc'] for r in log))", "pct(log[-1]['test_acc'])", PROBE_TABLE),
    ('E16', 'eval/zero_shot.py', 'lp.gather(-1, target[:, None]).sum().item()',
     'lp.gather(-1, target[:, None]).mean().item()', ZERO),
    ('E17', 'eval/zero_shot.py', "return 100 * results[name]['acc,none']", "return results[name]['acc,none']", ZERO),
    ('E18', 'eval/zero_shot.py', 'pa, pb = (with_mean(v) for v in PAPER[size])',
     'pb, pa = (with_mean(v) for v in PAPER[size])', ZERO),
    # prepare/: the token files and meta.json, the staging folder, batches, each data set's splits and encoding
    ('S1', 'prepare/common.py', 'writers[split].write(ids if eot is None else np.append(ids, eot))',
     'writers[split].write(ids)', PREP),
    ('S2', 'prepare/common.py', 'return np.min_scalar_type(vocab_size - 1)', 'return np.min_scalar_type(vocab_size)',
     PREP),
    ('S3', 'prepare/common.py', 'self.count += ids.size', 'self.count = ids.size', PREP),
    ('S4', 'prepare/common.py', "for k in ('kind', 'tokenizer', 'vocab_size')", "for k in ('kind', 'tokenizer')", PREP),
    ('S5', 'prepare/common.py', 'if os.path.exists(old):', 'if False:', PREP),
    ('S6', 'prepare/common.py', 'if pid.isdigit() and not _alive(int(pid)):', 'if pid.isdigit():', PREP),
    ('S7', 'prepare/data.py', 'x, y = w[:, :-1].contiguous(), w[:, 1:].contiguous()',
     'x, y = w[:, :-1].contiguous(), w[:, :-1].contiguous()', BATCHES),
    ('S8', 'prepare/data.py', 'return x, nxt.masked_fill(nxt == pad_id, -1)', 'return x, nxt', BATCHES),
    ('S9', 'prepare/data.py', 'rows.gather(1, last)', 'rows.gather(1, last - 1)', f'{BATCHES} {INDIRECT}'),
    ('S10', 'prepare/data.py', 'elif counted is not None and n != counted:', 'elif False:', PREP),
    ('S11', 'prepare/data.py', 'np.random.default_rng((*seed, epoch))', 'np.random.default_rng(tuple(seed))',
     INDIRECT),
    ('S12', 'prepare/indirect_indexing.py', 'letters[src + shift]])', 'letters[src - shift]])', INDIRECT),
    ('S13', 'prepare/indirect_indexing.py', 'seed * 1000 + i,', 'seed * 1000,', INDIRECT),
    ('S14', 'prepare/indirect_indexing.py', "start = 0 if pad == 'right' else row_len - len(ids)", 'start = 0',
     INDIRECT),
    ('S15', 'prepare/linux_c.py', "group = '/'.join(os.path.dirname(path).split('/')[:GROUP_DEPTH])",
     'group = os.path.dirname(path)', PREP),
    ('S16', 'prepare/linux_c.py', 'hexdigest()[:8], 16) % 100', 'hexdigest()[:8], 16) % 50', PREP),
    ('S17', 'prepare/shakespeare.py', "'train': [n for n in names if n not in VAL_PLAYS + TEST_PLAYS]",
     "'train': [n for n in names if n not in VAL_PLAYS]", PREP),
    ('S18', 'prepare/shakespeare_char.py', "itos = sorted(set(''.join(texts.values())))",
     "itos = list(set(''.join(texts.values())))", PREP),
    ('S19', 'prepare/genome.py', '_POW = 4 ** np.arange(K - 1, -1, -1, dtype=np.int64)',
     '_POW = 4 ** np.arange(K, dtype=np.int64)', PREP),
    ('S20', 'prepare/jsb_chorales.py', 'for v in list(chord)[:4] + [-1] * (4 - len(chord))]',
     'for v in list(chord)[:4]]', PREP),
    ('S21', 'prepare/maestro.py', "for shift in (range(-3, 4) if s == 'train' else (0,))]",
     'for shift in range(-3, 4)]', PREP),
    ('S22', 'prepare/bpe.py', "'smollm': True", "'smollm': False", f'{GGUF}::test_gguf_tokenizer'),
    ('S23', 'prepare/bpe.py', "self.eot_token = ids.get('<|endoftext|>', gguf_field(",
     "self.eot_token = (gguf_field(", f'{GGUF}::test_gguf_tokenizer'),
    ('S24', 'prepare/bpe.py', "'tokenizer.ggml.merges', [])]", "'tokenizer.ggml.merges', [])][::-1]",
     f'{GGUF}::test_gguf_tokenizer'),
    ('S25', 'prepare/bpe.py', 'if kind == 3]', 'if kind == 1]', f'{GGUF}::test_gguf_tokenizer'),
    ('S26', 'prepare/bpe.py', 'ByteLevel(add_prefix_space=False', 'ByteLevel(add_prefix_space=True',
     f'{GGUF}::test_gguf_tokenizer'),
    ('S27', 'prepare/openwebtext.py', 'VAL_FRACTION = 0.0005', 'VAL_FRACTION = 0.001', OWT_SPLIT),
    ('S28', 'prepare/openwebtext.py', 'SEED = 2357', 'SEED = 1337', OWT_SPLIT),
    ('S29', 'prepare/openwebtext.py', "{'ids': gpt2_encode_docs(batch['text'], num_threads=1)}",
     "{'ids': gpt2_encoding().encode_ordinary_batch(batch['text'], num_threads=1)}", OWT_SPLIT),
    ('S30', 'prepare/openwebtext.py', "BUILDERS = {'.parquet': 'parquet', '.jsonl': 'json', '.json': 'json',",
     "BUILDERS = {'.parquet': 'parquet', '.json': 'json', '.jsonl': 'json',", OWT_SOURCE),
    ('S31', 'prepare/openwebtext.py', "kwargs = {'sample_by': 'document'} if builder == 'text' else {}",
     'kwargs = {}', OWT_SOURCE),
    ('S32', 'prepare/openwebtext.py', "if 'text' not in ds.column_names:", 'if False:', BAD_SOURCE),
    ('S33', 'prepare/pg19.py', 'for title, text in books if text.strip()]', 'for title, text in books]',
     PG19_LOCAL),
    ('S34', 'prepare/pg19.py', "for path in find_files(args.source, '*.txt')]",
     "for path in find_files(args.source, '*.txt')[::-1]]", PG19_LOCAL),
    ('S35', 'prepare/pg19.py', 'gpt2_encode_docs(text for _, text in books)',
     'gpt2_encoding().encode_ordinary_batch([text for _, text in books])', PG19_LOCAL),
    ('S36', 'prepare/pg19.py', 'os.path.relpath(path, args.source)', 'os.path.basename(path)', PG19_LOCAL),
    ('S37', 'prepare/pg19.py', "book.get('short_book_title', str(i))", 'str(i)', PG19_HUB),
    ('S38', 'prepare/pg19.py', "split='test')", "split='train')", PG19_HUB),
    ('S39', 'prepare/bpe.py', "gguf_field(reader, 'tokenizer.ggml.eos_token_id'))",
     "gguf_field(reader, 'tokenizer.ggml.bos_token_id'))",
     f'{GGUF}::test_gguf_tokenizer_without_endoftext_ends_a_document_with_eos'),
    # results/linux_c/study.py: the paired differences and their t-test, the mean over seeds, sizes, the paper, figures
    ('Y1', 'results/linux_c/study.py', 'd = [p - r for p, r in zip(pope, rope)]',
     'd = [r - p for p, r in zip(pope, rope)]', STUDY),
    ('Y2', 'results/linux_c/study.py', 'sd = statistics.stdev(d)', 'sd = statistics.pstdev(d)', STUDY),
    ('Y3', 'results/linux_c/study.py', 't_test_p(t, len(d) - 1)', 't_test_p(t, len(d))', STUDY),
    ('Y4', 'results/linux_c/study.py', 'return max(0.0, 1 - 2 * total * h / 3)', 'return max(0.0, 0.5 - total * h / 3)',
     STUDY),
    ('Y5', 'results/linux_c/study.py', "for s in seeds] for e in ('pope', 'rope'))",
     "for s in (seeds if e == 'pope' else seeds[::-1])] for e in ('pope', 'rope'))", STUDY),
    ('Y6', 'results/linux_c/study.py', 'return f"{statistics.mean(values):.4f}{sd}', 'return f"{values[0]:.4f}{sd}',
     STUDY),
    ('Y7', 'results/linux_c/study.py', "SHAPES = {'-16m': '4 x 256', '': '8 x 512', '-124m': '12 x 768'}",
     "SHAPES = {'-16m': '4 x 256', '-124m': '12 x 768'}", STUDY),
    ('Y8', 'results/linux_c/study.py', 'for m, (r, p) in PAPER_SIZES.items())', 'for m, (p, r) in PAPER_SIZES.items())',
     STUDY),
    ('Y9', 'results/linux_c/study.py', "by.get(('pope', a['seed']))", "by.get(('pope', 1))", STUDY),
    ('Y10', 'results/linux_c/study.py', "and a['seed'] in seeds", 'and True', STUDY),
    ('Y11', 'results/linux_c/study.py', "gaps = [[p['final']['val_loss'] - r['final']['val_loss']",
     "gaps = [[r['final']['val_loss'] - p['final']['val_loss']", STUDY),
    # results/indirect_indexing/: the rank test, the steps to a threshold, the solve rate, a layout's ingredients
    ('Y12', 'results/indirect_indexing/seeds.py', 'extreme = sum(abs(gehan(split)) >= observed',
     'extreme = sum(gehan(split) >= observed', SEEDS),
    ('Y13', 'results/indirect_indexing/seeds.py', "if r['test_acc'] >= t), None)", "if r['test_acc'] > t), None)",
     SEEDS),
    ('Y14', 'results/indirect_indexing/seeds.py', " if ok or r['complete']]", ']', SEEDS),
    ('Y15', 'results/indirect_indexing/layouts.py', "'20-40', 'yes', 'no'),", "'20-40', 'yes', 'yes'),", SEEDS),
    # results/ablations/ and results/conversion/: the mean over seeds, a conversion's own source, its best val loss
    ('Y16', 'results/ablations/table.py', 'lambda v: sum(v) / len(v)', 'lambda v: v[-1]', ABLATIONS),
    ('Y17', 'results/conversion/table.py', "{run.split('-')[0]}-s{seed}", 'rope-s{seed}', CONVERSION),
    ('Y18', 'results/conversion/table.py', "best = lambda log: min(e['val_loss'] for e in log)",
     "best = lambda log: log[-1]['val_loss']", CONVERSION),
]


def test_every_mutant_names_text_found_once_in_its_file():
    for name, path, text, new, _ in MUTANTS:
        with open(os.path.join(ROOT, path), encoding='utf-8') as f:
            assert f.read().count(text) == 1 and new != text, f'{name}: {text!r} is not once in {path}'


def main(names):
    chosen = [m for m in MUTANTS if not names or m[0] in names]
    test_every_mutant_names_text_found_once_in_its_file()
    tree = tempfile.mkdtemp(prefix='mutants-')
    try:
        return run_mutants(chosen, tree)
    finally:
        shutil.rmtree(tree)


def run_mutants(chosen, tree):
    """Each mutant in a copy of the working tree's files, its tests run until the first failure."""
    files = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for path in files.splitlines():
        os.makedirs(os.path.join(tree, os.path.dirname(path)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, path), os.path.join(tree, path))
    pytest = [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider']
    named = sorted({t for m in chosen for t in m[4].split()})  # first, unchanged: they pass
    if subprocess.run(pytest + named, cwd=tree, capture_output=True).returncode != 0:
        sys.exit(f'the tests fail before any change ({" ".join(named)}): mend them first')
    survived = []
    for name, path, text, new, tests in chosen:
        with open(os.path.join(tree, path), encoding='utf-8') as f:
            source = f.read()
        with open(os.path.join(tree, path), 'w', encoding='utf-8') as f:
            f.write(source.replace(text, new))
        start = time.time()
        run = subprocess.run(pytest + tests.split(), cwd=tree, capture_output=True, text=True)
        with open(os.path.join(tree, path), 'w', encoding='utf-8') as f:
            f.write(source)
        failed = [line for line in run.stdout.splitlines() if line.startswith('FAILED')]
        verdict = 'killed' if run.returncode == 1 and failed else 'SURVIVED' if run.returncode == 0 \
            else f'error (pytest exit {run.returncode})'
        print(f'{name:4} {verdict:8} {time.time() - start:4.0f} s  {path}: {text.strip()[:50]!r}'
              + (f'  by {failed[0][7:].split(" - ")[0]}' if failed else ''), flush=True)
        if verdict != 'killed':
            survived.append(name)
    print(f'{len(chosen) - len(survived)} of {len(chosen)} mutants killed'
          + (f'; not killed: {" ".join(survived)}' if survived else ''))
    return 1 if survived else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
