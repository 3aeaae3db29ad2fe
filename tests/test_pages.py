"""Every command on a page runs as written: each `python -m X`, `python X.py` and `bash X.sh` in the code blocks of
the tracked .md files names a script of the repository, and each --flag it passes is one that script takes (its
argparse options, as --help lists them; for train.py, a key of its config)."""

import ast
import functools
import glob
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

from test_links import ROOT, repository_files

FLAG = re.compile(r'--[A-Za-z][\w-]*')


def code_blocks(text):
    """The lines of the fenced and indented code blocks of a markdown page, each with its line number."""
    out, fenced, in_indented, blank = [], False, False, True
    for n, line in enumerate(text.split('\n'), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
        elif fenced:
            out.append((n, line))
        else:
            in_indented = (line.startswith('    ') or line.startswith('\t')) and (blank or in_indented)
            if in_indented:
                out.append((n, line))
        blank = not line.strip()
    return out


def inline_code(text):
    """(line number, text) of the inline code spans of a page's prose (a span may run over a line break)."""
    lines = set(n for n, _ in code_blocks(text))  # (and the fences: their backticks open no span)
    prose = '\n'.join('' if n in lines or line.lstrip().startswith('```') else line
                      for n, line in enumerate(text.split('\n'), 1))
    return [(prose.count('\n', 0, m.start()) + 1, m.group(1).replace('\n', ' '))
            for m in re.finditer(r'`([^`]+)`', prose)]


def commands(text):
    """(line number, script, flags) of every command in the code of a page (blocks and inline spans): script is
    'X.py', 'X.sh' or '-m X'; flags are the --names given after it (their values cut off). Continued lines are
    joined; `a && b`, `a; b` and `a | b` are separate commands."""
    joined, start = inline_code(text), None
    for n, line in code_blocks(text):
        if start is None:
            start, acc = n, ''
        acc += line.rstrip()
        if acc.endswith('\\'):
            acc = acc[:-1] + ' '
        else:
            joined.append((start, acc))
            start = None
    if start is not None:
        joined.append((start, acc))
    out = []
    for n, line in joined:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # not shell (an unbalanced quote in an output listing)
            continue
        segment = []
        for word in words + ['&&']:
            if word in ('&&', ';', '|', '||'):
                out.extend((n, *found) for found in [script_of(segment)] if found)
                segment = []
            else:
                segment.append(word)
    return out


def script_of(words):
    """(script, flags) of one shell command: python -m X / python X.py / torchrun ... X.py / bash X.sh."""
    for i, word in enumerate(words):
        if word in ('python', 'python3') and i + 1 < len(words):
            if words[i + 1] == '-m' and i + 2 < len(words):
                return '-m ' + words[i + 2], flags(words[i + 3:])
            if words[i + 1].endswith('.py'):
                return words[i + 1], flags(words[i + 2:])
        if word == 'torchrun':
            for j in range(i + 1, len(words)):
                if words[j].endswith('.py'):
                    return words[j], flags(words[j + 1:])
        if word == 'bash' and i + 1 < len(words) and words[i + 1].endswith('.sh'):
            return words[i + 1], []
    return None


def flags(words):
    """The --names among a command's words (--key=value or --key value), up to an output redirection."""
    out = []
    for word in words:
        if word.startswith('>') or word.startswith('2>'):
            break
        if word == '...':
            out.append(word)  # a placeholder for more of the same, which runs nothing
        m = FLAG.match(word)
        if m and (len(word) == m.end() or word[m.end()] == '='):
            out.append(m.group())
    return out


def script_path(script):
    """The file of the repository that a script names, or None where it is another package's (python -m pytest)."""
    if script.startswith('-m '):
        module = script[3:]
        top = module.split('.')[0]
        if not os.path.exists(os.path.join(ROOT, top)) and not os.path.exists(os.path.join(ROOT, top + '.py')):
            assert importlib.util.find_spec(top) is not None, f'no module {module}'
            return None
        base = os.path.join(*module.split('.'))
        for path in (base + '.py', os.path.join(base, '__main__.py')):
            if os.path.isfile(os.path.join(ROOT, path)):
                return path
        return base + '.py'  # (missing: the test says so)
    return os.path.normpath(script)


@functools.cache
def config_keys():
    """train.py's config keys: the assignments from its top to `defaults`."""
    tree = ast.parse(open(os.path.join(ROOT, 'train.py')).read())
    keys = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'defaults':
            return keys
        if isinstance(node, ast.Assign):
            keys += [t.id for t in node.targets if isinstance(t, ast.Name)]
    raise AssertionError('train.py has no defaults')


@functools.cache
def accepted(script):
    """The --flags a script takes: train.py's config keys, or the options its --help lists."""
    if script == 'train.py':
        return {'--' + k for k in config_keys()}
    command = [sys.executable, '-m', script[3:]] if script.startswith('-m ') else [sys.executable, script]
    p = subprocess.run(command + ['--help'], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, f'{script} --help failed:\n{p.stdout}{p.stderr}'
    return set(FLAG.findall(p.stdout))


def pages():
    tracked = repository_files()
    if tracked is None:
        pytest.skip('not a git checkout')
    return sorted(p for p in tracked if p.endswith('.md'))


def problems(page):
    """What does not run as written among the commands of a page."""
    out = []
    for n, script, given in commands(open(os.path.join(ROOT, page), encoding='utf-8').read()):
        path = script_path(script)
        if path is None:
            continue
        if '...' in given:
            out.append(f'{page}:{n}: {script}: "..." in the command: write it out in full')
        elif '<' in path:  # a pattern (python -m prepare.<name>): some script must fit it
            if not glob.glob(os.path.join(ROOT, re.sub(r'<[^>]*>', '*', path))):
                out.append(f'{page}:{n}: {script}: no script fits {path}')
        elif not os.path.isfile(os.path.join(ROOT, path)):
            out.append(f'{page}:{n}: {script}: no such script ({path})')
        elif not path.endswith('.sh'):
            unknown = [f for f in given if f not in accepted(script if script.startswith('-m ') else path)]
            if unknown:
                out.append(f'{page}:{n}: {script} takes no {", ".join(unknown)}')
    return out


def test_every_command_on_a_page_names_a_script_and_flags_it_takes():
    found = [p for page in pages() for p in problems(page)]
    assert not found, 'commands on the pages that do not run as written:\n' + '\n'.join(found)


def test_the_command_reader():
    text = ('Run\n\n    pip install -r x.txt && python train.py config/a.py --batch_size=4   # a comment --no\n'
            '    python -m eval.extrapolation --final a.json \\\n        --label A --out d > log 2>&1\n\n'
            '```\ntorchrun --standalone --nproc_per_node=8 train.py --max_iters=10\nbash results/x/reproduce.sh\n```\n'
            'prose `python sample.py\n--top_k=1` and `--no_command`\n')
    assert commands(text) == [(11, 'sample.py', ['--top_k']), (3, 'train.py', ['--batch_size']),
                              (4, '-m eval.extrapolation', ['--final', '--label', '--out']),
                              (8, 'train.py', ['--max_iters']), (9, 'results/x/reproduce.sh', [])]
    assert '--batch_size' in accepted('train.py') and '--batch_sise' not in accepted('train.py')
    assert flags(['a.json', '--label', 'A', '...', '--out=d', '>', 'log', '--x']) == ['--label', '...', '--out']
