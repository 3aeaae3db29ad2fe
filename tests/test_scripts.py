"""results/*/reproduce.sh, run against stand-ins for python, nvidia-smi, git, pip and torchrun in a copy of the
scripts: the usage on -h/--help or an unknown argument with nothing run or written, folders of their own, the
summary read from final.json, no GPU script that passes without a GPU, and no process ended by a name pattern."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'results', '*', 'reproduce*.sh')))
STUB_PYTHON = r'''#!/usr/bin/env bash
echo "python $*" >> "$STUB_LOG"
case $1 in
  -c) case $2 in *torch.cuda.is_available*) [ -n "${FAKE_GPU:-}" ]; exit ;; esac
      exec "$REAL_PYTHON" "$@" ;;
  train.py) for a in "$@"; do case $a in --out_dir=*) d=${a#--out_dir=} ;; esac; done
            [ -n "${STUB_SLEEP:-}" ] && sleep "$STUB_SLEEP"
            [ -n "${STUB_TRAIN_FAILS:-}" ] && { echo "stub: train.py failed"; exit 1; }
            mkdir -p "$d" && echo '{"iter": 2, "val_loss": 1.25, "test_loss": 1.5}' > "$d/final.json"
            echo "ended $d" >> "$STUB_LOG"; exit 0 ;;
  -m) exit 0 ;;
  *) exit "${STUB_RC:-0}" ;;
esac
'''


@pytest.fixture
def sandbox(tmp_path):
    """(root, env, log): a copy of the scripts under root, a PATH whose python, nvidia-smi, git, pip and torchrun
    only write their command lines into log."""
    root = tmp_path / 'repo'
    for rel in SCRIPTS + ['results/common.sh']:
        os.makedirs(root / os.path.dirname(rel), exist_ok=True)
        (root / rel).write_text(open(os.path.join(ROOT, rel)).read())
    stubs = tmp_path / 'bin'
    stubs.mkdir()
    (stubs / 'python').write_text(STUB_PYTHON)
    for name in ('nvidia-smi', 'git', 'pip', 'torchrun', 'nvidia-cuda-mps-control'):
        (stubs / name).write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "$STUB_LOG"\n'
                                  '[ "$1" = -L ] && [ -n "${FAKE_GPU:-}" ] && echo "GPU 0: stand-in"\n'
                                  '[ -n "${FAKE_GPU:-}" ]\n')
    for f in stubs.iterdir():
        f.chmod(0o755)
    log = tmp_path / 'calls.log'
    env = {'PATH': f'{stubs}:/usr/bin:/bin', 'HOME': str(tmp_path), 'STUB_LOG': str(log),
           'REAL_PYTHON': sys.executable}
    return root, env, log


def files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob('*'))


def run(root, env, script, *args, **extra):
    return subprocess.run(['bash', str(root / script), *args], cwd=root.parent, env={**env, **extra},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize('arg', ['--help', '-h', '--no-such-flag', 'bogus'])
@pytest.mark.parametrize('script', SCRIPTS)
def test_usage_and_nothing_else(sandbox, script, arg):
    root, env, log = sandbox
    before = files(root)
    p = run(root, env, script, arg)
    out = p.stdout + p.stderr
    assert f'bash {script}' in out, out  # its usage, with its command lines
    assert (p.returncode == 0) == (arg in ('--help', '-h'))
    assert p.returncode != 0 or arg in ('--help', '-h')
    assert not log.exists(), log.read_text()  # nothing run
    assert files(root) == before and sorted(os.listdir(root.parent)) == ['bin', 'repo']  # nothing written


@pytest.mark.parametrize('script,runs', [
    ('results/quick_start/reproduce.sh', ['pope', 'rope', 'pope-s2', 'rope-s2', 'indirect-pope', 'indirect-rope']),
    ('results/music_genome/reproduce.sh', [f'{t}-{pe}' for t in ('jsb', 'maestro', 'genome') for pe in ('rope',
                                                                                                          'pope')])])
def test_summary_from_final_json_in_folders_of_its_own(sandbox, script, runs):
    root, env, log = sandbox
    for d in ('jsb_chorales', 'maestro', 'genome'):
        os.makedirs(root / 'data' / d)
        (root / 'data' / d / 'meta.json').write_text('{}')
    p = run(root, env, script, OUT='out-mine')
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines == [f'out-mine/{r}/final.json: 2 iterations, val_loss 1.2500, test_loss 1.5000' for r in runs]
    made = {os.path.dirname(f) for f in files(root) if f.endswith('final.json')}
    assert made == {f'out-mine/{r}' for r in runs}  # never out-quick-pope, out-jsb-pope and the like
    p = run(root, env, script)  # the default: out-results-<name>
    assert p.returncode == 0 and sorted(d for d in os.listdir(root) if d.startswith('out-')) == [
        'out-mine', 'out-results-' + ('quick' if 'quick' in script else 'music')]


def test_speed_indirect_summary(sandbox):
    root, env, log = sandbox
    p = run(root, env, 'results/speed/reproduce.sh', 'indirect', FAKE_GPU='1')
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'out-speed/indirect_pope_10k/final.json: 2 iterations, val_loss 1.2500, test_loss 1.5000' in p.stdout


@pytest.mark.parametrize('script', ['results/kernel/reproduce.sh', 'results/speed/reproduce.sh'])
def test_gpu_scripts_refuse_without_a_gpu(sandbox, script):
    root, env, log = sandbox
    before = files(root)
    p = run(root, env, script)
    assert p.returncode == 1 and p.stdout == '' and len(p.stderr.strip().splitlines()) == 1, p.stdout + p.stderr
    assert 'needs an NVIDIA GPU' in p.stderr and files(root) == before


def test_kernel_script_fails_when_a_benchmark_fails(sandbox):
    root, env, log = sandbox
    p = run(root, env, 'results/kernel/reproduce.sh', FAKE_GPU='1', STUB_RC='1')  # bench_attention.py fails
    assert p.returncode != 0 and 'failed: out-kernel/logs/table_gqa.log' in p.stderr, p.stdout + p.stderr
    p = run(root, env, 'results/kernel/reproduce.sh', FAKE_GPU='1')
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize('jobs', ['0', '-2', 'x'])
def test_jobs_below_one_is_refused(sandbox, jobs):
    root, env, log = sandbox
    before = files(root)
    p = run(root, env, 'results/ablations/reproduce.sh', JOBS=jobs)
    assert p.returncode == 2 and f'JOBS={jobs}: give a whole number of 1 or more' in p.stderr
    assert not log.exists() and files(root) == before


def test_indirect_study_runs_jobs_at_a_time_from_its_queue(sandbox):
    """JOBS=1: the second run starts only once the first has ended, and wait returns when the queue is empty."""
    root, env, log = sandbox
    study = dict(JOBS='1', FIRST_LOOK='0', STUB_SLEEP='1', STUDY='st')
    script = 'results/indirect_indexing/reproduce.sh'
    p = run(root, env, script, 'start', 'leftpad_pope_s1', 'leftpad_rope_s1', 'shift0_pope_s2', **study)
    assert p.returncode == 0 and 'queued, 1 at a time: leftpad_rope_s1 shift0_pope_s2' in p.stdout, p.stdout + p.stderr
    p = run(root, env, script, 'wait', '30', **study)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = [line.split('--out_dir=')[1] if 'train.py' in line else line for line in log.read_text().splitlines()
            if 'train.py' in line or line.startswith('ended')]
    assert runs == ['st/leftpad_pope_s1', 'ended st/leftpad_pope_s1', 'st/leftpad_rope_s1', 'ended st/leftpad_rope_s1',
                    'st/shift0_pope_s2', 'ended st/shift0_pope_s2']
    assert not any(f.endswith(('pid', 'queue')) for f in files(root / 'st'))


def test_indirect_study_finish_ends_the_queue_and_its_runs(sandbox):
    root, env, log = sandbox
    study = dict(JOBS='1', FIRST_LOOK='0', STUB_SLEEP='30', STUDY='st')
    script = 'results/indirect_indexing/reproduce.sh'
    assert run(root, env, script, 'start', 'leftpad_pope_s1', 'leftpad_rope_s1', **study).returncode == 0
    p = run(root, env, script, 'start', 'shift0_pope_s1', **study)  # a second start while runs are queued
    assert p.returncode == 2 and 'st has runs queued' in p.stderr
    p = run(root, env, script, 'finish', **study)
    assert p.returncode == 0, p.stdout + p.stderr
    time.sleep(3)  # longer than the runner's poll: had it survived, it would have started the queued run
    assert 'leftpad_rope_s1' not in log.read_text() and 'ended' not in log.read_text()
    assert not any(f.endswith(('pid', 'queue')) for f in files(root / 'st'))


def test_indirect_replica_settings_give_train_py_the_replications_model(sandbox):
    """leftpad_replica: the replication's rows and its model as it trained (LayerNorm, biases, an untied output
    layer, PyTorch's init, float32 throughout, weight decay on every parameter); leftpad_replica_arch: its layers and
    init alone, trained as our runs are."""
    root, env, log = sandbox
    study = dict(FIRST_LOOK='0', STUDY='st')
    script = 'results/indirect_indexing/reproduce.sh'
    p = run(root, env, script, 'start', 'leftpad_replica_rope_s7', 'leftpad_replica_arch_pope_s2', **study)
    assert p.returncode == 0, p.stdout + p.stderr
    assert run(root, env, script, 'wait', '30', **study).returncode == 0
    lines = {line.split('--out_dir=st/')[1]: line.split() for line in log.read_text().splitlines() if 'train.py' in line}
    model = {'--norm=layernorm', '--bias=True', '--tie_embeddings=False', '--init=torch'}
    replica, arch = lines['leftpad_replica_rope_s7'], lines['leftpad_replica_arch_pope_s2']
    assert replica[2] == 'config/indirect_rope_leftpad.py' and '--seed=7' in replica
    assert model | {'--dtype=float32', '--weight_decay_on=all'} <= set(replica)
    assert arch[2] == 'config/indirect_pope_leftpad.py' and model <= set(arch)
    assert not any(a.startswith(('--dtype', '--weight_decay_on')) for a in arch)
def test_smollm2_study_steps_evaluation_and_summary(sandbox):
    """The token budget becomes steps, each run starts from the model with its own YaRN scale, and the evaluation
    takes the model itself (RoPE, and YaRN without a fine-tune) beside every run's best.pt."""
    root, env, log = sandbox
    script = 'results/conversion/reproduce_smollm2.sh'
    p = run(root, env, script, DATA='d')
    assert p.returncode == 1 and 'no data/d: make it first' in p.stderr and not log.exists()
    os.makedirs(root / 'data' / 'd')
    (root / 'data' / 'd' / 'test.bin').write_bytes(b'')
    p = run(root, env, script, DATA='d', CTX='64', BATCH='4', MICRO='2', TOKENS='2560', SEEDS='1 2', RUNS='pope yarn-ft')
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == '10 steps of 4 x 64 tokens a run (2560 tokens)'
    trains = [line.split() for line in log.read_text().splitlines() if line.startswith('python train.py')]
    assert [t[2] for t in trains] == ['config/smollm2_pope_convert.py', 'config/smollm2_rope_yarn_ft.py'] * 2
    assert all({'--init_from=smollm2-135m', '--dataset=d', '--block_size=64', '--batch_size=2',
                '--gradient_accumulation_steps=2', '--max_iters=10', '--warmup_iters=1', '--eval_interval=2'} <= set(t)
               for t in trains)
    assert [t[3:5] for t in trains] == [['--seed=1', '--yarn_scale=1'], ['--seed=1', '--yarn_scale=4'],
                                        ['--seed=2', '--yarn_scale=1'], ['--seed=2', '--yarn_scale=4']]
    evaluation = next(line for line in log.read_text().splitlines() if 'eval.extrapolation' in line)
    assert ('--windows documents --out out-conversion-smollm2/extrapolation --ckpt smollm2-135m --yarn_scale 1 --label '
            'rope --ckpt smollm2-135m --yarn_scale 4 --label rope+yarn4 --ckpt out-conversion-smollm2/pope-s1/best.pt '
            '--yarn_scale 1 --label pope-s1 --ckpt out-conversion-smollm2/yarn-ft-s1/best.pt --yarn_scale 4') in evaluation
    assert 'out-conversion-smollm2/yarn-ft-s2/final.json: 2 iterations, val_loss 1.2500' in p.stdout
    p = run(root, env, script, DATA='d', RUNS='rope')
    assert p.returncode == 2 and "RUNS holds 'rope'" in p.stderr


def test_smollm2_study_trains_and_evaluates_apart(sandbox):
    """ONLY=train trains and stops before the evaluation; ONLY=eval trains nothing, refuses a run not trained yet,
    and scores the trained runs; any other ONLY is one line with nothing run."""
    root, env, log = sandbox
    script = 'results/conversion/reproduce_smollm2.sh'
    os.makedirs(root / 'data' / 'd')
    (root / 'data' / 'd' / 'test.bin').write_bytes(b'')
    small = dict(DATA='d', CTX='64', BATCH='2', MICRO='2', TOKENS='1280')

    def calls():
        lines = log.read_text().splitlines() if log.exists() else []
        log.write_text('')
        return ([line for line in lines if line.startswith('python train.py')],
                [line for line in lines if 'eval.extrapolation' in line])
    p = run(root, env, script, **small, ONLY='both')
    assert p.returncode == 2 and 'ONLY=both: choose train, eval' in p.stderr and calls() == ([], [])
    p = run(root, env, script, **small, ONLY='eval', RUNS='pope')
    assert p.returncode == 1 and 'pope-s1337 has not finished training' in p.stderr and calls() == ([], [])
    p = run(root, env, script, **small, ONLY='train', RUNS='pope')
    trains, evaluations = calls()
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(trains) == 1 and 'config/smollm2_pope_convert.py' in trains[0] and evaluations == []
    p = run(root, env, script, **small, ONLY='eval', RUNS='pope')
    trains, evaluations = calls()
    assert p.returncode == 0, p.stdout + p.stderr
    assert trains == [] and len(evaluations) == 1 and 'pope-s1337/best.pt' in evaluations[0]


def settled(root):
    """Every arm of results/linux_c/reproduce.sh's study folder st ended (its pid file gone), or 30 s passed."""
    deadline = time.time() + 30
    while glob.glob(str(root / 'st' / 'runs' / '*' / 'pid')) and time.time() < deadline:
        time.sleep(0.2)


def test_linux_c_study_verbs_arms_and_a_failed_arm(sandbox):
    """results/linux_c/reproduce.sh: bad verbs, arm names and numbers are one line with nothing run; an arm running is
    not started twice, one whose process is gone is; a failed arm names its step and log; finish says when no seed
    has both arms done."""
    root, env, log = sandbox
    script, study = 'results/linux_c/reproduce.sh', dict(STUDY='st')
    before = files(root)
    bad = (': <pope|rope>_s<seed>, <pope|rope>-<16m|124m>_s<seed> or pope-<nosoftplus|relu|nodelta>_s<seed>, '
           'e.g. pope_s1337')
    for args, message in ((['start'], 'start: name the arms to start, e.g. start pope_s1337 rope_s1337'),
                          (['start', 'pope_s01'], 'bad arm name pope_s01' + bad),
                          (['start', 'yarn_s1'], 'bad arm name yarn_s1' + bad),
                          (['start', 'pope-relu_s1', 'pope-foo_s1'], 'bad arm name pope-foo_s1' + bad),
                          (['start', 'pope-relu'], 'bad arm name pope-relu' + bad),
                          (['start', 'pope_s1', 'rope_s1', 'pope_s1'], 'pope_s1 is named twice: name each arm once'),
                          (['wait', 'abc'], 'wait abc: give a whole number of seconds, e.g. wait 540'),
                          (['wait', '-5'], 'wait -5: give a whole number of seconds, e.g. wait 540'),
                          (['start', 'pope_s1', 'FINETUNE=no'], 'FINETUNE=no: give 1 (fine-tune at 4x, the default) or 0')):
        extra = dict(a.split('=') for a in args if '=' in a)
        p = run(root, env, script, *[a for a in args if '=' not in a], **study, **extra)
        assert p.returncode == 2 and p.stderr.strip() == message and p.stdout == '', p.stdout + p.stderr
    assert not log.exists() and files(root) == before
    p = run(root, env, script, 'finish', **study)
    assert p.returncode == 1 and p.stderr.strip() == (f'finish: no seed has both its pre-trainings ended in st/runs/ '
                                                      f'yet: wait for them (bash {root / script} wait SECONDS)'), p.stderr
    # a failed arm: its step and the last line of that step's log, and how to start it again
    assert run(root, env, script, 'start', 'pope_s1', STUB_TRAIN_FAILS='1', **study).returncode == 0
    settled(root)
    p = run(root, env, script, 'wait', '0', **study)
    assert (f'== st/runs/pope_s1/: ended, not done (failed: st/runs/pope_s1/pretrain.log: stub: train.py failed); '
            f'start it again: bash {root / script} start pope_s1') in p.stdout, p.stdout
    # an arm running is not started again; one killed (its pid file left behind, as after a machine's restart) is
    p = run(root, env, script, 'start', 'rope_s2', STUB_SLEEP='30', **study)
    pid = int((root / 'st' / 'runs' / 'rope_s2' / 'pid').read_text())
    try:
        p = run(root, env, script, 'start', 'rope_s2', **study)
        assert p.returncode == 2 and p.stderr.strip() == f'st/runs/rope_s2 is running (pid {pid}): wait for it'
    finally:
        os.killpg(pid, signal.SIGKILL)  # the arm started above, its own process group (setsid)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            time.sleep(0.2)
        except ProcessLookupError:
            break
    assert (root / 'st' / 'runs' / 'rope_s2' / 'pid').exists()
    assert 'st/runs/rope_s2/: ended, not done (stopped, no step failed' in run(root, env, script, 'wait', '0',
                                                                               **study).stdout
    for arm in ('rope_s2', 'pope_s2'):  # and a seed with both arms done gets its frequency usage
        assert run(root, env, script, 'start', arm, **study).stdout.startswith(f'started {arm} (pid ')
    settled(root)
    p = run(root, env, script, 'finish', **study)
    assert p.returncode == 0 and '== st/runs/pope_s2/: done' in p.stdout, p.stdout + p.stderr
    assert 'python -m eval.frequency_usage --rope st/runs/rope_s2/pretrain/ckpt.pt' in log.read_text()
    # FINETUNE=0: the arm is done once its pre-trained model is scored, with no fine-tune
    assert run(root, env, script, 'start', 'pope_s3', FINETUNE='0', **study).returncode == 0
    settled(root)
    assert (root / 'st' / 'runs' / 'pope_s3' / 'done').exists() and 'st/runs/pope_s3/ft' not in log.read_text()
    assert '--out st/runs/pope_s3/documents' in log.read_text()


def test_linux_c_ablation_arms_pretrain_with_their_flag_and_end_after_their_scores(sandbox):
    """pope-nosoftplus_s<seed> and the like: config/linux_c_pope.py with the ablation's flag, scored as PoPE is with
    its own label, no fine-tune whatever FINETUNE says; finish takes no ablation for PoPE's arm of its seed."""
    root, env, log = sandbox
    script, study = 'results/linux_c/reproduce.sh', dict(STUDY='st', FINETUNE='1')
    arms = ('pope-nosoftplus_s1', 'pope-relu_s1', 'pope-nodelta_s1', 'rope_s1')
    p = run(root, env, script, 'start', *arms, **study)
    assert p.returncode == 0 and p.stdout.count('started ') == 4, p.stdout + p.stderr
    settled(root)
    commands = log.read_text()
    for arm, flag, label in (('pope-nosoftplus_s1', '--pope_mu=identity', 'PoPE, no softplus'),
                             ('pope-relu_s1', '--pope_mu=relu', 'PoPE, ReLU'),
                             ('pope-nodelta_s1', '--pope_delta=none', 'PoPE, no delta')):
        assert (f'python train.py config/linux_c_pope.py {flag} --seed=1 --out_dir=st/runs/{arm}/pretrain '
                '--overwrite=True') in commands, commands
        for windows in ('documents', 'stream'):
            assert (f'--ckpt st/runs/{arm}/pretrain/ckpt.pt --label {label} --out st/runs/{arm}/{windows} '
                    '--batch_size 16') in commands
        assert (root / 'st' / 'runs' / arm / 'done').exists() and f'st/runs/{arm}/ft' not in commands
    assert '--out_dir=st/runs/rope_s1/ft' in commands  # the RoPE arm beside them is fine-tuned
    p = run(root, env, script, 'finish', **study)
    assert p.returncode == 1 and 'finish: no seed has both its pre-trainings ended' in p.stderr, p.stdout + p.stderr
    assert 'eval.frequency_usage' not in log.read_text()


def test_linux_c_size_arms_pretrain_their_config_and_end_after_their_scores(sandbox):
    """<pope|rope>-<16m|124m>_s<seed>: config/linux_c_<pope|rope>_<size>.py, scored with the size in the label,
    no fine-tune whatever FINETUNE says; a size that has no config is a bad name."""
    root, env, log = sandbox
    script, study = 'results/linux_c/reproduce.sh', dict(STUDY='st', FINETUNE='1')
    p = run(root, env, script, 'start', 'pope-16m_s1', 'rope-124m_s2', **study)
    assert p.returncode == 0 and p.stdout.count('started ') == 2, p.stdout + p.stderr
    settled(root)
    commands = log.read_text()
    for arm, config in (('pope-16m_s1', 'linux_c_pope_16m'), ('rope-124m_s2', 'linux_c_rope_124m')):
        seed = arm[-1]
        assert (f'python train.py config/{config}.py --seed={seed} --out_dir=st/runs/{arm}/pretrain '
                '--overwrite=True') in commands, commands
        assert (root / 'st' / 'runs' / arm / 'done').exists() and f'st/runs/{arm}/ft' not in commands
        assert os.path.isfile(os.path.join(ROOT, 'config', f'{config}.py'))
    assert '--ckpt st/runs/pope-16m_s1/pretrain/ckpt.pt --label PoPE 16M --out st/runs/pope-16m_s1/documents' \
        in commands
    assert '--yarn_scale 10 --label RoPE 124M+YaRN s=10 (no fine-tune)' in commands
    p = run(root, env, script, 'start', 'pope-32m_s1', **study)
    assert p.returncode == 2 and p.stderr.startswith('bad arm name pope-32m_s1: ')


def test_no_script_ends_processes_by_name():
    tracked = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True).stdout.split()
    words = ('pkill', 'pgrep', 'kill' + 'all')
    hits = [f for f in tracked if f.endswith(('.sh', '.py')) and f != 'tests/test_scripts.py'
            and any(w in open(os.path.join(ROOT, f), errors='replace').read() for w in words)]
    assert hits == []


def test_indirect_study_with_no_run_says_so(sandbox):
    root, env, log = sandbox
    script = 'results/indirect_indexing/reproduce.sh'
    p = run(root, env, script, 'wait', '1', STUDY='st')
    assert p.returncode == 0 and 'no run in st/: start one with bash' in p.stdout, p.stdout + p.stderr
    p = run(root, env, script, 'finish', STUDY='st')
    assert p.returncode == 1 and 'finish: no run in st/ to stop or probe' in p.stderr, p.stdout + p.stderr
    assert not log.exists()


def test_indirect_study_bad_verbs_say_what_is_wrong(sandbox):
    root, env, log = sandbox
    script = 'results/indirect_indexing/reproduce.sh'
    for args, line in ((['bogus'], "unknown verb 'bogus': give start RUN..., wait SECONDS or finish (see above)"),
                       ([], 'give start RUN..., wait SECONDS or finish (see above)'),
                       (['start'], 'start: name the runs to start, e.g. start leftpad_pope_s1337'),
                       (['wait', 'abc'], 'wait abc: give a whole number of seconds, e.g. wait 540')):
        p = run(root, env, script, *args, STUDY='st')
        assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith(line), p.stderr
    assert not log.exists()


def test_a_study_packs_its_small_files_and_no_checkpoint(sandbox):
    """With $OUT set (a GPU machine), wait packs the study for the trip back: logs and results, never a
    checkpoint, nor one caught mid-save (its .tmp), which would not fit what comes back."""
    root, env, log = sandbox
    arm = root / 'st' / 'runs' / 'pope_s1337'  # (the script works from the repository root)
    os.makedirs(arm / 'pretrain')
    for name in ('arm.log', 'done', 'pretrain/final.json', 'pretrain/ckpt.pt', 'pretrain/best.pt.tmp'):
        (arm / name).write_text('x')
    out = root.parent / 'out'
    out.mkdir()
    p = run(root, env, 'results/linux_c/reproduce.sh', 'wait', '1', STUDY='st', OUT=str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    packed = subprocess.run(['tar', 'tzf', str(out / 'study.tgz')], capture_output=True, text=True).stdout.split()
    assert 'st/runs/pope_s1337/pretrain/final.json' in packed and 'st/runs/pope_s1337/arm.log' in packed
    assert not [f for f in packed if '.pt' in f], packed
