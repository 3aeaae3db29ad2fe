"""The layouts of the indirect-indexing rows (prepare/indirect_indexing.py): padding side, '<bos>',
the target's position, and the chunked generation and pass order behind the large training split."""

import json

import numpy as np
import pytest
import torch

from eval.indirect_probe import parse_rows
from prepare import indirect_indexing as ii
from prepare.data import example_batch, pass_rows


def made(tmp_path, variant, n=400):
    ii.prepare(str(tmp_path / variant), seed=0, sizes={'train': n, 'val': n, 'test': n},
               variant=variant)
    meta = json.load(open(tmp_path / variant / 'meta.json'))
    rows = np.fromfile(tmp_path / variant / 'test.bin', dtype=meta['dtype'])
    rows = rows.reshape(-1, meta['row_len'])
    return rows, meta


def fields(row, meta):
    """(pads before, pads after, the example's text) of one row."""
    itos, pad = meta['itos'], meta['pad_id']
    real = np.flatnonzero(row != pad)
    return real[0], len(row) - 1 - real[-1], ''.join(itos[t] for t in row[real])


def check_example(text, sep):
    string, source, shift, target = text.split(sep)
    assert len(set(string)) == len(string) and 20 <= len(string) <= 40
    assert string[string.index(source) + int(shift)] == target  # the target really is shift away
    return int(shift)


def test_leftpad_rows_end_with_the_target_after_a_space(tmp_path):
    """The replication's layout: 56 input tokens, pads first (at least 6), ', ' separators, shifts
    of 0 allowed; the last input position is always the space before the target."""
    rows, meta = made(tmp_path, 'indirect_indexing_leftpad')
    assert rows.shape[1] == meta['row_len'] == 57
    assert meta['pad'] == 'left' and meta['itos'][-1] == ' '
    shifts = []
    for row in rows:
        before, after, text = fields(row, meta)
        assert after == 0 and before >= 6 and (row[:before] == meta['pad_id']).all()
        assert meta['itos'][row[55]] == ' ' and text[-1] == meta['itos'][row[56]]
        shifts.append(check_example(text, ', '))
    assert 0 in shifts and min(shifts) == -15 and max(shifts) == 15
    x, y = example_batch(torch.from_numpy(rows), meta['pad_id'])
    assert x.shape == (len(rows), 56) and (y[:, :55] == -1).all()
    assert (y[:, 55] == torch.from_numpy(rows[:, 56])).all()


def test_leftpad_nospace_and_bos_rows(tmp_path):
    rows, meta = made(tmp_path, 'indirect_indexing_leftpad_nospace')
    assert rows.shape[1] == 57 and ' ' not in meta['itos']
    for row in rows:
        before, after, text = fields(row, meta)
        assert after == 0 and before >= 9 and check_example(text, ',') != 0
    rows, meta = made(tmp_path, 'indirect_indexing_bos')
    bos = meta['itos'].index('<bos>')
    assert rows.shape[1] == 49 and bos == len(meta['itos']) - 1 and meta['pad'] == 'right'
    assert (rows[:, 0] == bos).all() and (rows[:, 1:] != bos).all()
    for row in rows:
        before, after, text = fields(row, meta)
        assert before == 0 and check_example(text.removeprefix('<bos>'), ',') != 0
    x, y = example_batch(torch.from_numpy(rows), meta['pad_id'])
    last = (rows != meta['pad_id']).sum(1) - 1  # right padding: the target is the last real token
    targets = torch.from_numpy(rows[np.arange(len(rows)), last])
    assert (y[torch.arange(len(rows)), torch.from_numpy(last - 1)] == targets).all()


@pytest.mark.parametrize('variant', ['indirect_indexing', 'indirect_indexing_leftpad',
                                     'indirect_indexing_bos'])
def test_probe_finds_the_fields_in_every_layout(tmp_path, variant):
    rows, meta = made(tmp_path, variant, n=50)
    f = parse_rows(rows, meta)
    sep = meta['task']['sep']
    for i, row in enumerate(rows):
        source = meta['itos'][row[f['start'][i] + f['src'][i]]]
        assert meta['itos'][row[f['q_src'][i]]] == source  # the source letter in the question
        target = row[f['start'][i] + f['src'][i] + f['shift'][i]]
        assert meta['itos'][target] == meta['itos'][row[f['q_last'][i] + 1]]
        assert meta['itos'][row[f['q_last'][i]]] == sep[-1]  # the last input token closes the shift


def test_each_split_holds_examples_of_its_own(tmp_path):
    """train, val and test come from seeds of their own (seed * 1000 + 0, 1, 2): no val or test row is a
    training row, so the scores are of examples the model has not seen."""
    made(tmp_path, 'indirect_indexing', n=300)
    rows = {s: np.fromfile(tmp_path / 'indirect_indexing' / f'{s}.bin', np.uint8).reshape(-1, ii.ROW_LEN)
            for s in ('train', 'val', 'test')}
    train = {r.tobytes() for r in rows['train']}
    assert not any(r.tobytes() in train for s in ('val', 'test') for r in rows[s])
    assert not {r.tobytes() for r in rows['val']} & {r.tobytes() for r in rows['test']}
    for i, split in enumerate(('train', 'val', 'test')):
        assert np.array_equal(rows[split], ii.make_split(300, i))


def test_large_splits_are_made_in_chunks(monkeypatch):
    """Chunk 0 is the split as one stream of its seed (so 1M-row splits are as before); the other
    chunks have seeds of their own; the parallel path gives the same rows."""
    monkeypatch.setattr(ii, 'CHUNK', 100)
    whole = ii.make_split(250, 7)
    assert whole.shape == (250, ii.ROW_LEN)
    assert np.array_equal(whole[:100], ii._chunk((100, 7, ii.ROW_LEN, 'right', False, {})))
    assert np.array_equal(whole[100:200], ii._chunk((100, '7:1', ii.ROW_LEN, 'right', False, {})))
    assert not np.array_equal(whole[:50], whole[100:150])
    # no row twice in the 200k-step study
    assert ii.VARIANTS['indirect_indexing_fresh']['n_train'] >= 200_000 * 64


def test_pass_rows_visit_each_row_once_per_pass():
    draws = np.arange(35)
    rows = pass_rows(10, (3, 0), draws)
    for p in range(3):
        assert sorted(rows[10 * p:10 * p + 10]) == list(range(10))
    assert not np.array_equal(rows[:10], rows[10:20])  # each pass in a new order
    assert np.array_equal(rows, pass_rows(10, (3, 0), draws))
    assert not np.array_equal(rows, pass_rows(10, (4, 0), draws))
    # a draw's row depends on its number alone
    assert np.array_equal(pass_rows(10, (3, 0), draws[17:23]), rows[17:23])


@pytest.mark.parametrize('variant', ['indirect_indexing', 'indirect_indexing_spaces',
                                     'indirect_indexing_leftpad',
                                     'indirect_indexing_leftpad_nospace', 'indirect_indexing_bos'])
def test_a_typed_question_is_encoded_as_the_rows_hold_it(tmp_path, variant):
    """sample.py's prompt (ii.question): 'string,source,shift,' typed without spaces, or with ', '
    and an unsigned shift, becomes exactly the tokens before a row's target (separator, '<bos>' and
    left padding as the rows have them); what is not a question is refused."""
    rows, meta = made(tmp_path, variant, n=50)
    sep = meta['task']['sep']
    for row in rows:
        string, source, shift, target = fields(row, meta)[2].replace('<bos>', '').split(sep)
        ids = np.flatnonzero(row != meta['pad_id'])
        # left padding included; right padding (after the target) not
        before_target = row[:ids[-1]].tolist()
        assert ii.question(f'{string},{source},{shift},', meta) == before_target
        assert ii.question(f'{string}, {source}, {int(shift)}', meta) == before_target
    for bad in ('abc,a', 'abc,a,x,', 'abc,,+1,', 'ab?,a,+1,'):
        with pytest.raises(ValueError):
            ii.question(bad, meta)


def test_fixedlen_rows_fix_the_query_position_without_padding(tmp_path):
    """Strings of 30 letters and two-digit shifts: every row is 38 tokens, none of them padding, so
    the query (the ',' before the target) is always at position 36; the shift reads back as written,
    and a question is laid out so."""
    rows, meta = made(tmp_path, 'indirect_indexing_fixedlen')
    assert rows.shape[1] == meta['row_len'] == 38 and (rows != meta['pad_id']).all()
    shifts = set()
    for row in rows:
        text = ''.join(meta['itos'][t] for t in row)
        string, source, shift, target = text.split(',')
        assert len(string) == 30 and len(set(string)) == 30 and len(shift) == 3 and shift[0] in '+-'
        assert text[36] == ',' and string[string.index(source) + int(shift)] == target
        shifts.add(int(shift))
    assert 0 not in shifts and {-15, -1, 1, 15} <= shifts
    f = parse_rows(rows[:50], meta)
    assert (f['q_last'] == 36).all() and (f['start'] == 0).all()
    assert ii.question('ABCDEFGHIJKLMNOPQRSTUVWXYZabcd,C,+4', meta) == [
        meta['itos'].index(c) for c in 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcd,C,+04,']
    with pytest.raises(ValueError, match="the string has 20 letters, this data set's strings 30"):
        ii.question('ABCDEFGHIJKLMNOPQRST,C,+4', meta)
