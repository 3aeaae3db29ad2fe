"""The documentation holds together: every relative link and image in README.md, HISTORY.md, docs/ and results/
points at a file of the repository, and the pages a user reads speak of the repository, not of how it was made."""

import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKED = ['README.md', 'HISTORY.md', 'docs/**/*.md', 'results/**/*.md']  # every relative link must resolve
PLAIN = ['README.md', 'docs/**/*.md', 'results/**/*.md']  # and these say nothing of how the project was made
# whole words: 'around 5' and 'release' are not what this looks for
HISTORY_WORDS = re.compile(r'\bround [0-9]|issue #|device call|\blease', re.IGNORECASE)
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')  # [text](target "title"), ![alt](src)


def pages(patterns):
    found = {os.path.relpath(p, ROOT) for pat in patterns for p in glob.glob(os.path.join(ROOT, pat), recursive=True)}
    return sorted(found)


def prose(text):
    """The text without fenced code blocks, indented code blocks and inline code, where a link is not a link."""
    text = re.sub(r'^```.*?^```[^\n]*$', lambda m: '\n' * m.group().count('\n'), text, flags=re.MULTILINE | re.DOTALL)
    kept, in_code, blank = [], False, True
    for line in text.split('\n'):
        in_code = (line.startswith('    ') or line.startswith('\t')) and (blank or in_code)
        blank = not line.strip()
        kept.append('' if in_code else line)
    return re.sub(r'`[^`\n]*`', '', '\n'.join(kept))


def links(text):
    """(line number, target) of every relative link and image in a markdown page."""
    out = []
    for n, line in enumerate(prose(text).split('\n'), 1):
        for target in LINK.findall(line):
            if not re.match(r'[a-z][a-z0-9+.-]*:|#', target, re.IGNORECASE):  # http:, mailto:, #anchor
                out.append((n, target.split('#')[0]))
    return out


def repository_files():
    """The files git tracks (so a link to an ignored or untracked file fails here as in a fresh clone), or every
    file where this is not a git checkout."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.normpath(p) for p in out.decode().split('\0') if p}


def test_the_pages_exist():
    assert 'README.md' in pages(LINKED) and 'HISTORY.md' in pages(LINKED)
    assert len(pages(['results/**/*.md'])) >= 5 and pages(['docs/**/*.md'])


def resolves(path, tracked):
    """path (relative to the root) is a file of the repository, or a folder that holds some."""
    if tracked is None:
        return os.path.exists(os.path.join(ROOT, path))
    return path in tracked or any(p.startswith(path + os.sep) for p in tracked)


@pytest.mark.parametrize('page', pages(LINKED))
def test_every_relative_link_resolves_to_a_file(page):
    tracked = repository_files()
    broken = []
    for n, target in links(open(os.path.join(ROOT, page), encoding='utf-8').read()):
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if path.startswith('..') or not resolves(path, tracked):
            broken.append(f'{page}:{n}: {target}')
    assert not broken, 'links to no file of the repository:\n' + '\n'.join(broken)


@pytest.mark.parametrize('page', pages(PLAIN))
def test_no_word_of_how_the_project_was_made(page):
    hits = [f'{page}:{n}: {line.strip()}' for n, line in enumerate(open(os.path.join(ROOT, page), encoding='utf-8'), 1)
            if HISTORY_WORDS.search(line)]
    assert not hits, "the page speaks of the project's history (HISTORY.md is the place):\n" + '\n'.join(hits)


def test_the_link_reader_finds_links_and_skips_code():
    text = ('See [a](a.md) and ![b](img/b.png "title") and [c](https://x.org) and [d](#anchor) and [e](e.md#part).\n'
            '`[not](inline.md)`\n\n    [not](indented.md)\n```\n[not](fenced.md)\n```\n- list\n    [f](f.md)\n')
    assert links(text) == [(1, 'a.md'), (1, 'img/b.png'), (1, 'e.md'), (9, 'f.md')]
    assert HISTORY_WORDS.search('as measured in Round 8') and HISTORY_WORDS.search('a device call')
    assert not HISTORY_WORDS.search('around 5 minutes, rounded to 3 digits, the JSON release')


MACHINE_PATH = re.compile(r'(?<![\w.<>-])/(work|root|tmp|home|opt)/')  # an absolute path of the machine a file was made on


def text_files():
    """The tracked files that are text (no NUL byte in their first 8 kB)."""
    tracked = repository_files()
    if tracked is None:
        pytest.skip('not a git checkout')
    out = []
    for path in sorted(tracked):
        with open(os.path.join(ROOT, path), 'rb') as f:
            if b'\0' not in f.read(8192):
                out.append(path)
    return out


def test_no_path_of_a_build_machine():
    hits = [f'{path}:{n}: {line.strip()[:120]}' for path in text_files()
            for n, line in enumerate(open(os.path.join(ROOT, path), encoding='utf-8', errors='replace'), 1)
            if MACHINE_PATH.search(line)]
    assert not hits, ('absolute paths of a build machine (write a path relative to the repository, <repo> or '
                      '<tmp>; code takes a folder from tempfile):\n' + '\n'.join(hits))
    assert MACHINE_PATH.search('wrote /' + 'work/main/out/x.csv') and MACHINE_PATH.search('--out=/' + 'tmp/a')
    assert not MACHINE_PATH.search('python results/speed/bench.py --out=<tmp>/generate and a checkout/tmp' + '/x')
