"""The build backend of vramledger's Python package (PEP 517), with the
standard library alone: `pip install ./python` needs no setuptools, no
wheel and no network, and `pip install -e ./python` works too (PEP 660).

pyproject.toml is the metadata (its [project] table, PEP 621), read with
tomllib, or on Pythons before 3.11 with read_toml() below, which reads the
part of TOML that file uses. The version is vramledger/__init__.py's
__version__ ([project] dynamic = ["version"]), the same number as the
program's (CMakeLists.txt's project(VERSION); a test keeps them equal).

What it builds:
- the wheel (PEP 427), pure Python (py3-none-any): every .py file of the
  package named by [project] name, and its .dist-info: METADATA (core
  metadata 2.1), WHEEL, entry_points.txt where [project] scripts declares
  commands, and RECORD, each file's sha256 and size (PEP 376);
- the editable wheel (PEP 660): a .pth file naming the source directory,
  so the installed package is the checkout's own files;
- the sdist (PEP 517, "source distributions"): NAME-VERSION.tar.gz holding
  PKG-INFO, pyproject.toml, the readme, this backend and the package.
Archives are reproducible: entries sorted, every time stamp
SOURCE_DATE_EPOCH (else 1980-01-01), owner and modes fixed.
"""
import base64
import csv
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

__all__ = ["build_editable", "build_sdist", "build_wheel", "get_requires_for_build_editable",
           "get_requires_for_build_sdist", "get_requires_for_build_wheel",
           "prepare_metadata_for_build_editable", "prepare_metadata_for_build_wheel",
           "read_toml"]

# The [project] keys written into the metadata: any other key stops the
# build rather than being left out of the package without a word.
_PROJECT_KEYS = {"name", "version", "dynamic", "description", "readme", "requires-python",
                 "dependencies", "optional-dependencies", "scripts"}
_README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain"}


class _Project:
    """pyproject.toml's [project], checked, with its derived names."""

    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            data = _load_toml(f.read().decode("utf-8"))
        p = data.get("project")
        if not isinstance(p, dict) or "name" not in p:
            raise ValueError("pyproject.toml: no [project] table with a name")
        unknown = sorted(set(p) - _PROJECT_KEYS)
        if unknown:
            raise ValueError("pyproject.toml: [project] %s: %s does not write it into the package"
                             % (", ".join(unknown), os.path.basename(__file__)))
        self.p = p
        self.name = p["name"]
        # the package directory and the distribution's file names (PEP 427's
        # escaping, PEP 503's normal form)
        self.package = self.name.replace("-", "_")
        self.dist = re.sub(r"[-_.]+", "_", self.name).lower()
        self.version = self._version()
        self.dist_info = "%s-%s.dist-info" % (self.dist, self.version)

    def _version(self):
        if "version" in self.p:
            return self.p["version"]
        if "version" not in self.p.get("dynamic", []):
            raise ValueError("pyproject.toml: [project] has no version, and it is not dynamic")
        init = os.path.join(self.root, self.package, "__init__.py")
        with open(init, encoding="utf-8") as f:
            m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
        if not m:
            raise ValueError('%s: no line __version__ = "X.Y.Z"' % init)
        return m.group(1)

    def metadata(self):
        """METADATA (PKG-INFO in the sdist): core metadata 2.1."""
        p = self.p
        lines = ["Metadata-Version: 2.1", "Name: " + self.name, "Version: " + self.version]
        if "description" in p:
            lines.append("Summary: " + p["description"])
        if "requires-python" in p:
            lines.append("Requires-Python: " + p["requires-python"])
        lines += ["Requires-Dist: " + r for r in p.get("dependencies", [])]
        for extra, reqs in sorted(p.get("optional-dependencies", {}).items()):
            lines.append("Provides-Extra: " + extra)
            for r in reqs:
                req, _, marker = r.partition(";")
                cond = 'extra == "%s"' % extra
                if marker.strip():
                    cond = "(%s) and %s" % (marker.strip(), cond)
                lines.append("Requires-Dist: %s; %s" % (req.strip(), cond))
        body = ""
        readme = self.readme()
        if readme:
            path, content_type = readme
            lines.append("Description-Content-Type: " + content_type)
            with open(os.path.join(self.root, path), encoding="utf-8") as f:
                body = "\n" + f.read()
        return ("\n".join(lines) + "\n" + body).encode("utf-8")

    def readme(self):
        """(path, content type) of [project] readme, or None."""
        r = self.p.get("readme")
        if r is None:
            return None
        if isinstance(r, dict):
            if "file" not in r:
                raise ValueError("pyproject.toml: [project] readme: only a file is read")
            return r["file"], r.get("content-type", "text/plain")
        ext = os.path.splitext(r)[1].lower()
        if ext not in _README_TYPES:
            raise ValueError("pyproject.toml: [project] readme %r: give its content-type" % r)
        return r, _README_TYPES[ext]

    def entry_points(self):
        """entry_points.txt's text, or None without [project] scripts."""
        scripts = self.p.get("scripts")
        if not scripts:
            return None
        return ("[console_scripts]\n"
                + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))).encode("utf-8")

    def package_files(self):
        """The package's .py files, relative to the root, '/'-separated, sorted."""
        out = []
        for d, dirs, files in os.walk(os.path.join(self.root, self.package)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            rel = os.path.relpath(d, self.root).replace(os.sep, "/")
            out += [rel + "/" + f for f in files if f.endswith(".py")]
        return sorted(out)

    def dist_info_files(self):
        """{name in the .dist-info: bytes} but RECORD."""
        files = {"METADATA": self.metadata(),
                 "WHEEL": ("Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: true\n"
                           "Tag: py3-none-any\n" % __name__).encode("utf-8")}
        ep = self.entry_points()
        if ep:
            files["entry_points.txt"] = ep
        return files


def _load_toml(text):
    try:
        import tomllib
    except ImportError:
        return read_toml(text)
    return tomllib.loads(text)


def read_toml(text):
    """TOML for Pythons without tomllib (before 3.11), as much of it as
    pyproject.toml uses: [table] headers (dotted), bare or quoted keys, and
    values that are basic or literal one-line strings, true, false,
    integers, or arrays of these (over several lines, commas trailing),
    with comments. Anything else raises ValueError naming the line."""
    pos = 0
    root = {}
    table = root
    defined = set()

    def fail(what):
        raise ValueError("pyproject.toml: line %d: %s (before Python 3.11 the build reads "
                         "part of TOML only)" % (text.count("\n", 0, pos) + 1, what))

    def blank(newlines):
        """skip spaces and comments, and newlines where NEWLINES"""
        nonlocal pos
        while pos < len(text):
            c = text[pos]
            if c in " \t" or (newlines and c in "\r\n"):
                pos += 1
            elif c == "#":
                while pos < len(text) and text[pos] != "\n":
                    pos += 1
            else:
                break

    def string():
        nonlocal pos
        quote = text[pos]
        if text.startswith(quote * 3, pos):
            fail("multi-line strings")
        pos += 1
        out = []
        while True:
            if pos >= len(text) or text[pos] == "\n":
                fail("unterminated string")
            c = text[pos]
            pos += 1
            if c == quote:
                return "".join(out)
            if c == "\\" and quote == '"':
                e = text[pos:pos + 1]
                pos += 1
                simple = {'"': '"', "\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                          "t": "\t"}
                if e in simple:
                    out.append(simple[e])
                elif e in ("u", "U"):
                    width = 4 if e == "u" else 8
                    digits = text[pos:pos + width]
                    if not re.fullmatch("[0-9A-Fa-f]{%d}" % width, digits):
                        fail("bad \\%s escape" % e)
                    out.append(chr(int(digits, 16)))
                    pos += width
                else:
                    fail("bad escape \\" + e)
            else:
                out.append(c)

    def key():
        nonlocal pos
        if pos < len(text) and text[pos] in "\"'":
            return string()
        m = re.compile(r"[A-Za-z0-9_-]+").match(text, pos)
        if not m:
            fail("expected a key")
        pos = m.end()
        return m.group(0)

    def dotted(end):
        """KEY(.KEY)* then END: a table header's or an assignment's keys"""
        nonlocal pos
        parts = [key()]
        blank(False)
        while text.startswith(".", pos):
            pos += 1
            blank(False)
            parts.append(key())
            blank(False)
        if not text.startswith(end, pos):
            fail("expected %r" % end)
        pos += len(end)
        return parts

    def value():
        nonlocal pos
        c = text[pos:pos + 1]
        if c in ("\"", "'"):
            return string()
        if c == "[":
            pos += 1
            items = []
            while True:
                blank(True)
                if text.startswith("]", pos):
                    pos += 1
                    return items
                items.append(value())
                blank(True)
                if text.startswith(",", pos):
                    pos += 1
                elif not text.startswith("]", pos):
                    fail("expected ',' or ']' in an array")
        m = re.compile(r"(true|false|[+-]?(0|[1-9](_?[0-9])*))(?=[\s,#\]]|$)").match(text, pos)
        if not m:
            fail("a value other than a string, true, false, an integer or an array")
        pos = m.end()
        word = m.group(1)
        return word == "true" if word in ("true", "false") else int(word.replace("_", ""))

    while True:
        blank(True)
        if pos >= len(text):
            return root
        if text.startswith("[[", pos):
            fail("arrays of tables")
        if text.startswith("[", pos):
            pos += 1
            blank(False)
            path = tuple(dotted("]"))
            if path in defined:
                fail("table [%s] defined twice" % ".".join(path))
            defined.add(path)
            table = root
            for part in path:
                table = table.setdefault(part, {})
                if not isinstance(table, dict):
                    fail("[%s] is not a table" % ".".join(path))
        else:
            path = dotted("=")
            blank(False)
            if pos >= len(text) or text[pos] in "\r\n":
                fail("a key without a value")
            t = table
            for part in path[:-1]:
                t = t.setdefault(part, {})
                if not isinstance(t, dict):
                    fail("%s is not a table" % part)
            if path[-1] in t:
                fail("key %s defined twice" % ".".join(path))
            t[path[-1]] = value()
        blank(False)
        if pos < len(text) and text[pos] not in "\r\n":
            fail("expected the end of the line")


# --- archives ---------------------------------------------------------------

def _epoch():
    """The archives' time stamp: SOURCE_DATE_EPOCH, else 1980-01-01 (the
    first a zip file holds)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "0")), 315532800)


def _read(root, rel):
    with open(os.path.join(root, *rel.split("/")), "rb") as f:
        return f.read()


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _write_wheel(project, wheel_directory, files):
    """FILES: [(name in the wheel, bytes)]; the .dist-info and its RECORD
    are added. Returns the wheel's file name."""
    files = list(files) + [(project.dist_info + "/" + n, d)
                           for n, d in sorted(project.dist_info_files().items())]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for name, data in files:
        w.writerow([name, _record_hash(data), len(data)])
    record_name = project.dist_info + "/RECORD"
    w.writerow([record_name, "", ""])
    files.append((record_name, record.getvalue().encode("utf-8")))
    wheel = "%s-%s-py3-none-any.whl" % (project.dist, project.version)
    stamp = time.gmtime(_epoch())[:6]
    tmp = os.path.join(wheel_directory, wheel + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, stamp)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, os.path.join(wheel_directory, wheel))
    return wheel


def _prepare_metadata(metadata_directory):
    project = _Project(os.getcwd())
    d = os.path.join(metadata_directory, project.dist_info)
    os.makedirs(d, exist_ok=True)
    for name, data in project.dist_info_files().items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return project.dist_info


# --- the PEP 517 and PEP 660 hooks -------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _Project(os.getcwd())
    return _write_wheel(project, wheel_directory,
                        [(rel, _read(project.root, rel)) for rel in project.package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose one file is a .pth naming this source directory: the
    site module puts it on sys.path, and the package imports from here."""
    project = _Project(os.getcwd())
    pth = "__editable__.%s-%s.pth" % (project.dist, project.version)
    return _write_wheel(project, wheel_directory,
                        [(pth, (os.path.abspath(project.root) + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    project = _Project(os.getcwd())
    base = "%s-%s" % (project.dist, project.version)
    readme = project.readme()
    backend = "_build/" + os.path.basename(__file__)  # pyproject's backend-path
    names = sorted(set(["pyproject.toml", backend] + ([readme[0]] if readme else [])
                       + project.package_files()))
    files = [(n, _read(project.root, n)) for n in names] + [("PKG-INFO", project.metadata())]
    sdist = base + ".tar.gz"
    tmp = os.path.join(sdist_directory, sdist + ".part")
    with open(tmp, "wb") as raw:
        # the gzip header's time stamp too, for a reproducible file
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=_epoch()) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, data in sorted(files):
                    info = tarfile.TarInfo(base + "/" + name)
                    info.size = len(data)
                    info.mtime = _epoch()
                    info.mode = 0o644
                    tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, os.path.join(sdist_directory, sdist))
    return sdist
