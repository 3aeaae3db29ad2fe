"""
The Linux kernel's hand-written C, a large real corpus that installs offline: every .c and .h file of the kernel
tree in GPT-2 tokens (the tokenizer of the paper's OpenWebText runs), one <|endoftext|> (50256) after each file;
with --tokenizer=smollm2-135m (or a .gguf file) in that model's tokens, into data/linux_c_smollm2.
From Debian's linux-source-6.12 (6.12.118: ~389M train, ~13M val, ~8M test tokens; GPL-2.0):

    apt-get install linux-source-6.12 && python -m prepare.linux_c      # reads /usr/src/linux-source-6.12.tar.xz
    python -m prepare.linux_c --source linux-6.12.118.tar.xz             # the same tree from kernel.org
    python -m prepare.linux_c --source linux-source-6.12/                # an unpacked tree
    python -m prepare.linux_c --export linux_c.tar.xz                    # the kept files alone, to rebuild elsewhere

(`apt-get download linux-source-6.12` fetches the .deb alone: `dpkg-deb -x` it and pass the tarball inside.)
`--export` writes the kept files and the tree's Makefile as a .tar.xz (119 MB against 152 MB for the whole tree;
xz at level 9, a few minutes); `--source` takes it like any tarball and makes the same data set (meta.json's
selection_sha256 is the same), which is how a machine without the package gets it.

What is kept: every regular file ending in .c or .h, except the generated register tables of
drivers/gpu/drm/amd/include/asic_reg/ (484 MB of #defines). Many drivers are near-copies of their siblings, so the
split is by folder, never by file: a file's group is its folder cut to its first four parts
(drivers/net/ethernet/intel/e1000e -> drivers/net/ethernet/intel), and the group's split is the first 8 hex digits
of sha256(group) mod 100: 0-1 val, 2-3 test, the rest train. Within a split the files follow in sorted path
order. Text is read as UTF-8 (the few undecodable bytes replaced).

Writes train.bin, val.bin, test.bin; files.tsv (each file's split, path and token count, in stream order: a file
of n tokens is followed by its <|endoftext|>, an empty one by nothing); meta.json with the kernel version (the tree's Makefile), the source
and its sha256, and selection_sha256: a sha256 over every kept path and its bytes, in order, the same whether the
tree came as a tarball, a folder or an export.
"""

import hashlib
import io
import json
import os
import tarfile

import numpy as np

from prepare.common import (WRITE_ERRORS, SourceMissing, argument_parser, check_writable, data_dir, encoding,
                            interrupted, run, start_dataset, write_meta, write_streams, writing)

DEFAULT_SOURCE = '/usr/src/linux-source-6.12.tar.xz'
EXCLUDED = ('drivers/gpu/drm/amd/include/asic_reg/',)  # generated tables, not written by people
GROUP_DEPTH = 4  # a file's group: its folder cut to this many parts
VAL, TEST = range(0, 2), range(2, 4)  # sha256(group) mod 100
EXPORT_INFO = 'linux_c_export.json'  # inside an export: where its files came from
EXPORT_MODES = {'.tar.xz': 'w:xz', '.txz': 'w:xz', '.tar.gz': 'w:gz', '.tgz': 'w:gz', '.tar': 'w'}  # by its ending


def kept(path):
    """Whether a path of the tree (relative to its top) is hand-written C."""
    return path.endswith(('.c', '.h')) and not path.startswith(EXCLUDED)


def split_of(path):
    """'train', 'val' or 'test' of a kept path: by its group (its folder's first GROUP_DEPTH parts), never by file."""
    group = '/'.join(os.path.dirname(path).split('/')[:GROUP_DEPTH]) or '.'
    h = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) % 100
    return 'val' if h in VAL else 'test' if h in TEST else 'train'


def kernel_version(makefile):
    """'6.12.118' from the top Makefile's VERSION, PATCHLEVEL, SUBLEVEL and EXTRAVERSION lines."""
    fields = {}
    for line in makefile.decode('utf-8', 'replace').splitlines()[:20]:
        key, eq, value = line.partition('=')
        if eq and key.strip() in ('VERSION', 'PATCHLEVEL', 'SUBLEVEL', 'EXTRAVERSION'):
            fields[key.strip()] = value.strip()
    if not all(k in fields for k in ('VERSION', 'PATCHLEVEL', 'SUBLEVEL')):
        return None
    return f"{fields['VERSION']}.{fields['PATCHLEVEL']}.{fields['SUBLEVEL']}{fields.get('EXTRAVERSION', '')}"


def read_tree(source):
    """({kept path: bytes}, the top Makefile's bytes or None, the export's info or None) of a folder or a tarball.
    A tarball's paths lose their first part when every member shares it (linux-source-6.12/...)."""
    files, extra = {}, {}
    if os.path.isdir(source):
        for folder, dirs, names in os.walk(source):
            dirs.sort()
            for name in names:
                full = os.path.join(folder, name)
                path = os.path.relpath(full, source).replace(os.sep, '/')
                if (kept(path) or path in ('Makefile', EXPORT_INFO)) and os.path.isfile(full) \
                        and not os.path.islink(full):
                    with open(full, 'rb') as f:
                        (files if kept(path) else extra)[path] = f.read()
    else:
        try:
            with tarfile.open(source, 'r|*') as tar:  # streamed: one pass over a compressed file
                for member in tar:
                    path = member.name.removeprefix('./')
                    if member.isfile() and (kept(path.partition('/')[2]) or kept(path)
                                            or path.rpartition('/')[2] in ('Makefile', EXPORT_INFO)):
                        files[path] = tar.extractfile(member).read()
        except (tarfile.TarError, EOFError, OSError) as err:
            raise SourceMissing(f'{source} is not a readable tarball ({type(err).__name__}: {err}): give the '
                                'kernel tarball, an unpacked tree or an export of this script') from None
        tops = {p.partition('/')[0] for p in files}
        if len(tops) == 1 and all('/' in p for p in files):  # one top folder: drop it
            files = {p.partition('/')[2]: b for p, b in files.items()}
        extra = {p: files.pop(p) for p in list(files) if p in ('Makefile', EXPORT_INFO)}
        files = {p: b for p, b in files.items() if kept(p)}  # a nested Makefile is not the top one
    info = None
    if EXPORT_INFO in extra:  # an export: where its files came from
        try:
            info = json.loads(extra[EXPORT_INFO])
            info = {k: info[k] for k in ('source_file', 'source_sha256')}
        except (ValueError, KeyError, TypeError):
            raise SourceMissing(f'{source}: its {EXPORT_INFO} is damaged or not of this script: make the export '
                                'again (--export) from the kernel tarball') from None
    return files, extra.get('Makefile'), info


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def selection_sha256(files):
    """sha256 over the kept paths and their bytes, in sorted order (each path and file length-prefixed)."""
    h = hashlib.sha256()
    for path in sorted(files):
        for part in (path.encode(), files[path]):
            h.update(len(part).to_bytes(8, 'little'))
            h.update(part)
    return h.hexdigest()


def check_export(path, source):
    """One line, before the work, for an --export that cannot be written: an unknown ending, a folder, the source
    itself, or a place that cannot be written."""
    if not path.endswith(tuple(EXPORT_MODES)):
        raise SourceMissing(f"--export {path}: name a tarball, ending in {', '.join(EXPORT_MODES)} (.tar.xz: the "
                            "smallest)")
    if os.path.isdir(path):
        raise SourceMissing(f"--export {path} is a folder: name the file to write, e.g. "
                            f"{os.path.join(path, 'linux_c.tar.xz')}")
    if os.path.exists(path) and os.path.samefile(path, source):
        raise SourceMissing(f"--export {path} is the --source it reads, which it would replace: name another file")
    check_writable(os.path.dirname(os.path.abspath(path)), f'--export {path}')


def export(files, makefile, info, path):
    """The kept files, the top Makefile and EXPORT_INFO as one tarball, compressed as path's ending says; written to
    path.tmp, then renamed: a write that fails or is stopped leaves no file (one line for a full disk)."""
    mode = next(m for ending, m in EXPORT_MODES.items() if path.endswith(ending))
    kwargs = {'preset': 9} if mode == 'w:xz' else {}
    tmp = path + '.tmp'
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with tarfile.open(tmp, mode, **kwargs) as tar:
            for name, data in [(EXPORT_INFO, json.dumps(info, indent=1).encode()), ('Makefile', makefile),
                               *sorted(files.items())]:
                member = tarfile.TarInfo(f'linux_c/{name}')
                member.size, member.mtime, member.mode = len(data), 0, 0o644
                tar.addfile(member, io.BytesIO(data))
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(err, OSError) and err.errno in WRITE_ERRORS:
            raise SourceMissing(f"could not write {path} ({err.strerror or err}): free some space or name another "
                                "--export") from None
        if isinstance(err, KeyboardInterrupt):
            interrupted(path)
        raise
    print(f'wrote {path}: {len(files):,} files, {os.path.getsize(path) / 1e6:.1f} MB')


def token_pieces(files, order, enc, batch=2048):
    """(split, ids) of each file in order, in the tokens of enc (prepare.common.encoding), a batch of files at a
    time on every core."""
    from tqdm import tqdm
    bar = tqdm(total=len(order), desc='tokenizing', unit=' files')
    for i in range(0, len(order), batch):
        paths = order[i:i + batch]
        bar.update(len(paths))
        texts = [files[p].decode('utf-8', 'replace') for p in paths]
        for p, ids in zip(paths, enc.encode_ordinary_batch(texts, num_threads=os.cpu_count() or 1)):
            yield split_of(p), np.array(ids, dtype=np.uint32)  # (written in meta.json's dtype)


def main(argv=None):
    p = argument_parser(__doc__, 'linux_c', f'the kernel tarball (default {DEFAULT_SOURCE}), an unpacked tree, or '
                        'an --export of this script', tokenizer=True)
    p.add_argument('--export', default=None, help='instead of the data set, write the kept files to this .tar.xz '
                   '(or .tar.gz, .tar)')
    args = p.parse_args(argv)

    source = args.source or DEFAULT_SOURCE
    if not os.path.exists(source):
        raise SourceMissing(f'{source} does not exist: `apt-get install linux-source-6.12` puts the tarball there, '
                            'or pass --source with a kernel tarball from kernel.org, an unpacked tree or an export')
    if source.endswith('.deb'):
        raise SourceMissing(f'{source} is a Debian package: unpack it (dpkg-deb -x {source} DIR) and pass '
                            '--source DIR/usr/src/linux-source-6.12.tar.xz')
    if os.path.isdir(source) and not os.path.isfile(os.path.join(source, 'Makefile')):  # before reading the folder
        inside = sorted(n for n in os.listdir(source) if n.startswith('linux') or n.endswith(('.tar.xz', '.tar.gz')))
        raise SourceMissing(f"{source} is a folder without a Makefile, not the top of a kernel tree: give the folder "
                            "that holds the kernel's Makefile, the kernel tarball or an export"
                            + (f" (here: {', '.join(inside[:3])})" if inside else ''))
    if args.export:
        check_export(args.export, source)
    else:  # a missing tokenizer, or an out_dir that is no data set or cannot be written, stop it before the work
        enc, work = encoding(args.tokenizer), start_dataset(args.out_dir or data_dir('linux_c', args.tokenizer))
    print(f'reading {source}')
    files, makefile, info = read_tree(source)
    version = kernel_version(makefile) if makefile else None
    if version is None:
        raise SourceMissing(f'{source} has no top Makefile with VERSION, PATCHLEVEL and SUBLEVEL: it is not a kernel '
                            'tree; give the kernel tarball, the folder that holds its Makefile, or an export')
    if not files:
        raise SourceMissing(f'{source} holds no .c or .h file: give the kernel tarball or tree')
    origin = info or {'source_file': os.path.basename(os.path.normpath(source)),  # an export: the file it came from
                      'source_sha256': None if os.path.isdir(source) else file_sha256(source)}
    origin = {'version': version, 'source_file': origin['source_file'], 'source_sha256': origin['source_sha256'],
              'selection_sha256': selection_sha256(files)}
    if args.export:
        return export(files, makefile, origin, args.export)

    order = sorted(files, key=lambda p: (('train', 'val', 'test').index(split_of(p)), p))
    sizes = []  # (split, path, tokens) in stream order

    def pieces():
        for path, (split, ids) in zip(order, token_pieces(files, order, enc)):
            sizes.append((split, path, len(ids)))
            yield split, ids
    counts = write_streams(work, pieces(), enc.n_vocab, enc.eot_token)
    with writing(work), open(os.path.join(work, 'files.tsv'), 'w', encoding='utf-8') as f:
        f.write('split\tpath\ttokens\n' + ''.join(f'{s}\t{p}\t{n}\n' for s, p, n in sizes))
    n_files = {split: sum(1 for s, _, n in sizes if s == split and n) for split in counts}
    return write_meta(
        work, vocab_size=enc.n_vocab, tokenizer=enc.name, eot=enc.eot_token, tokens=counts,
        source=(f"Linux {version}: its .c and .h files less {', '.join(EXCLUDED)}, from {origin['source_file']}, "
                f"{enc.name} tokens, an end of text ({enc.eot_token}) after every file; split by folder (its first {GROUP_DEPTH} parts, "
                "sha256 mod 100: 0-1 val, 2-3 test); files per split: "
                + ', '.join(f'{k} {v:,}' for k, v in n_files.items())),
        files=n_files, **origin)


if __name__ == '__main__':
    run(main)
