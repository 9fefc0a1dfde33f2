"""The Python package's build backend (python/_build/vramledger_build.py,
PEP 517 and PEP 660) called as pip calls it: the wheel's files, METADATA,
WHEEL and RECORD (PEP 427: every file's sha256 and size); the sdist; the
editable wheel's .pth; archives byte for byte the same from two builds;
its TOML reader for Pythons before 3.11 against tomllib; and the version,
vramledger.__version__, equal to `vramledger --version`'s
($VRAMLEDGER_BIN, set by ctest). usage: test_build_backend.py"""
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = os.path.join(ROOT, "python")
sys.path.insert(0, os.path.join(PY, "_build"))
sys.dont_write_bytecode = True  # nothing written into the source tree

import vramledger_build as backend  # noqa: E402

try:
    import tomllib
except ImportError:
    tomllib = None

VL = os.environ.get("VRAMLEDGER_BIN", "vramledger")


def package_sources():
    """the package's .py files, relative to python/"""
    out = []
    for d, dirs, files in os.walk(os.path.join(PY, "vramledger")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out += [os.path.relpath(os.path.join(d, f), PY) for f in files if f.endswith(".py")]
    return sorted(out)


def metadata_fields(text):
    head = text.split("\n\n", 1)[0]
    return [tuple(line.split(": ", 1)) for line in head.splitlines()]


class Hooks:
    """the backend's hooks run in a source directory (PEP 517: the working
    directory is the project's root), their output in a temporary one"""

    def setUp(self):
        self.out = tempfile.mkdtemp()
        self.cwd = os.getcwd()

    def tearDown(self):
        os.chdir(self.cwd)
        shutil.rmtree(self.out)

    def call(self, hook, *args, root=PY):
        os.chdir(root)
        try:
            return getattr(backend, hook)(*args)
        finally:
            os.chdir(self.cwd)


class Wheel(Hooks, unittest.TestCase):
    def setUp(self):
        super().setUp()
        name = self.call("build_wheel", self.out)
        self.assertEqual(name, "vramledger-%s-py3-none-any.whl" % version_in_init())
        self.path = os.path.join(self.out, name)
        with zipfile.ZipFile(self.path) as z:
            self.files = {n: z.read(n) for n in z.namelist()}
        self.info = "vramledger-%s.dist-info/" % version_in_init()

    def test_files(self):
        """the package's .py files and the .dist-info, nothing else (no
        __pycache__, not python/site/, the probe's sitecustomize, which
        `vramledger run` puts on the job's path itself)"""
        want = set(package_sources()) | {self.info + n for n in ("METADATA", "WHEEL", "RECORD")}
        self.assertEqual(set(self.files), want)
        for rel in package_sources():
            with open(os.path.join(PY, rel), "rb") as f:
                self.assertEqual(self.files[rel], f.read(), rel)

    def test_metadata(self):
        text = self.files[self.info + "METADATA"].decode()
        self.assertEqual(metadata_fields(text), [
            ("Metadata-Version", "2.1"), ("Name", "vramledger"), ("Version", version_in_init()),
            ("Summary", pyproject()["project"]["description"]),
            ("Requires-Python", pyproject()["project"]["requires-python"]),
            ("Provides-Extra", "torch"), ("Requires-Dist", 'torch; extra == "torch"'),
            ("Description-Content-Type", "text/markdown")])
        with open(os.path.join(PY, "README.md")) as f:
            self.assertEqual(text.split("\n\n", 1)[1], f.read())

    def test_wheel_file(self):
        self.assertEqual(self.files[self.info + "WHEEL"].decode(),
                         "Wheel-Version: 1.0\nGenerator: vramledger_build\n"
                         "Root-Is-Purelib: true\nTag: py3-none-any\n")

    def test_record(self):
        """one row per file, RECORD's own without hash; each hash the
        urlsafe base64 of the file's sha256, without padding"""
        rows = list(csv.reader(io.StringIO(self.files[self.info + "RECORD"].decode())))
        self.assertEqual(sorted(r[0] for r in rows), sorted(self.files))
        for name, digest, size in rows:
            if name == self.info + "RECORD":
                self.assertEqual((digest, size), ("", ""))
                continue
            data = self.files[name]
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            self.assertEqual(digest, "sha256=" + want, name)
            self.assertEqual(int(size), len(data), name)

    def test_reproducible(self):
        again = tempfile.mkdtemp()
        try:
            name = self.call("build_wheel", again)
            with open(self.path, "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read())
        finally:
            shutil.rmtree(again)

    def test_prepared_metadata_is_the_wheels(self):
        d = self.call("prepare_metadata_for_build_wheel", self.out)
        self.assertEqual(d + "/", self.info)
        for n in ("METADATA", "WHEEL"):
            with open(os.path.join(self.out, d, n), "rb") as f:
                self.assertEqual(f.read(), self.files[self.info + n], n)

    def test_no_requirements(self):
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        self.assertEqual(backend.get_requires_for_build_sdist(), [])
        self.assertEqual(backend.get_requires_for_build_editable(), [])


class Sdist(Hooks, unittest.TestCase):
    def test_members(self):
        """PKG-INFO, the metadata, the backend, the package; and a wheel
        built from it is the checkout's"""
        base = "vramledger-%s" % version_in_init()
        name = self.call("build_sdist", self.out)
        self.assertEqual(name, base + ".tar.gz")
        with tarfile.open(os.path.join(self.out, name)) as t:
            members = sorted(m.name for m in t.getmembers())
            self.assertEqual(members, sorted(
                [base + "/" + n for n in ("PKG-INFO", "README.md", "pyproject.toml",
                                          "_build/vramledger_build.py")]
                + [base + "/" + n for n in package_sources()]))
            t.extractall(self.out)
        src = os.path.join(self.out, base)
        wheels = [tempfile.mkdtemp(dir=self.out) for _ in range(2)]
        a = self.call("build_wheel", wheels[0])
        b = self.call("build_wheel", wheels[1], root=src)
        with open(os.path.join(wheels[0], a), "rb") as fa, open(os.path.join(wheels[1], b),
                                                                 "rb") as fb:
            self.assertEqual(fa.read(), fb.read())
        with open(os.path.join(src, "PKG-INFO")) as f, zipfile.ZipFile(
                os.path.join(wheels[0], a)) as z:
            self.assertEqual(f.read(), z.read("%s.dist-info/METADATA" % base).decode())


class Editable(Hooks, unittest.TestCase):
    def test_pth(self):
        """the editable wheel (PEP 660): a .pth naming python/, the same
        .dist-info"""
        v = version_in_init()
        name = self.call("build_editable", self.out)
        with zipfile.ZipFile(os.path.join(self.out, name)) as z:
            names = sorted(z.namelist())
            self.assertEqual(names, sorted(["__editable__.vramledger-%s.pth" % v] + [
                "vramledger-%s.dist-info/%s" % (v, n) for n in ("METADATA", "WHEEL", "RECORD")]))
            self.assertEqual(z.read("__editable__.vramledger-%s.pth" % v).decode(), PY + "\n")


class Project(Hooks, unittest.TestCase):
    """pyproject.toml's keys the backend writes, and the keys it refuses"""

    def copy(self, extra):
        root = os.path.join(self.out, "src")
        shutil.copytree(PY, root, ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(root, "pyproject.toml"), "a") as f:
            f.write(extra)
        return root

    def test_scripts(self):
        root = self.copy('\n[project.scripts]\nvl-demo = "vramledger.__main__:main"\n')
        name = self.call("build_wheel", self.out, root=root)
        with zipfile.ZipFile(os.path.join(self.out, name)) as z:
            ep = z.read("vramledger-%s.dist-info/entry_points.txt" % version_in_init())
        self.assertEqual(ep.decode(), "[console_scripts]\nvl-demo = vramledger.__main__:main\n")

    def test_unknown_key_refused(self):
        root = self.copy('\n[project.urls]\nHome = "https://example.org"\n')
        with self.assertRaisesRegex(ValueError, r"\[project\] urls"):
            self.call("build_wheel", self.out, root=root)
        self.assertEqual(os.listdir(self.out), ["src"])


class Toml(unittest.TestCase):
    """read_toml, for Pythons before 3.11, reads what tomllib reads"""

    SAMPLES = [
        '[project]\nname = "x"  # a comment\n',
        '# lead\n\n[a.b]\nk = [\n  "p",  # one\n  \'q\\n\',\n]\nn = 12\nt = true\n'
        '[a]\nf = false\n',
        '[ "quoted key" . bare-key ]\ns = "esc \\" \\\\ \\t \\u00e9 \\U0001F600"\n',
        'x.y = "dotted"\ne = []\nn = -1_000\n',
    ]

    @unittest.skipIf(tomllib is None, "no tomllib before Python 3.11")
    def test_pyproject(self):
        with open(os.path.join(PY, "pyproject.toml")) as f:
            text = f.read()
        self.assertEqual(backend.read_toml(text), tomllib.loads(text))

    @unittest.skipIf(tomllib is None, "no tomllib before Python 3.11")
    def test_samples(self):
        for s in self.SAMPLES:
            self.assertEqual(backend.read_toml(s), tomllib.loads(s), s)

    def test_refused(self):
        """what it does not read is an error naming the line, never a
        wrong value"""
        for s, line in [('a = "x"\nb = { c = 1 }\n', 2), ('[[t]]\n', 1), ('a = 1.5\n', 1),
                        ('a = """x"""\n', 1), ('a = "x" b = 1\n', 1), ('[t]\n[t]\n', 2),
                        ('a = 1\na = 2\n', 2), ('a = "open\n', 1), ('a =\n', 1)]:
            with self.assertRaisesRegex(ValueError, r"^pyproject.toml: line %d: " % line, msg=s):
                backend.read_toml(s)


def version_in_init():
    with open(os.path.join(PY, "vramledger", "__init__.py")) as f:
        return re.search(r'^__version__ = "(.+)"$', f.read(), re.M).group(1)


def pyproject():
    with open(os.path.join(PY, "pyproject.toml")) as f:
        return backend.read_toml(f.read())


class Version(unittest.TestCase):
    def test_program_and_package(self):
        """one version: the program's (CMakeLists.txt's project(VERSION)) is
        the package's; change both together"""
        out = subprocess.run([VL, "--version"], capture_output=True, text=True, check=True).stdout
        m = re.fullmatch(r"vramledger (\S+)\n", out)
        self.assertTrue(m, out)
        sys.path.insert(0, PY)
        try:
            import vramledger
        finally:
            sys.path.remove(PY)
        self.assertEqual(vramledger.__version__, m.group(1),
                         "python/vramledger/__init__.py's __version__ differs from the program's")
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            cm = re.search(r"^project\(vramledger VERSION (\S+)", f.read(), re.M)
        self.assertEqual(cm.group(1), vramledger.__version__)


if __name__ == "__main__":
    unittest.main()
