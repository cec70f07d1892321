"""Secret shapes a second fresh-eyes tester found left in saved and recorded traces (issue 13, B18):
each is removed and marked wherever it occurs in text, and ordinary text that merely looks alike
stays byte for byte."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcall_lab.record import record
from toolcall_lab.redaction import redact, scrub_text
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace_files import dumps, load, save, secret_warnings

# (shape, text as a tool printed it, the secret part, what the mark says)
# fmt: off
SECRETS = [
    ("fine-grained GitHub token", "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN",
     "github_pat_11ABCDEFG0123456789_abcdefghij", "a GitHub token"),
    ("Stripe live key", "stripe: sk_live_51AbCdEfGhIjKlMnOpQrStUv0123456789", "sk_live_51AbCdEfGh", "a Stripe-style key"),
    ("Stripe restricted test key", "key rk_test_51AbCdEfGhIjKlMnOpQr99 in use", "rk_test_51AbCd", "a Stripe-style key"),
    ("URL with a password", "connect to https://admin:S3cretPassw0rd@db.example.com:5432/prod now", "S3cretPassw0rd",
     "a password in a URL"),
    ("DATABASE_URL with credentials", "DATABASE_URL=postgres://admin:Sup3rS3cret@db:5432/app", "Sup3rS3cret",
     "a password in a URL"),
    ("PEM private key block", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx1y2z3abcDEF\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEAx1y2z3abcDEF", "a private key"),
    ("PEM block cut short", "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "b3BlbnNzaC1rZXkt",
     "a private key"),
    ("Google OAuth token", "Authorization is ya29.a0AfH6SMBxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012", "ya29.a0AfH6SMB",
     "a Google OAuth token"),
    ("AWS secret access key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI",
     "the value of aws_secret_access_key"),
    (".env line", "OPENAI_API_KEY=myverysecretvalue123\nDEBUG=1", "myverysecretvalue123", "the value of OPENAI_API_KEY"),
    ("env password", "DB_PASSWORD=hunter", "hunter", "the value of DB_PASSWORD"),
    ("password= in output", "login with password=hunter2 ok", "hunter2", "the value of password"),
    ("token: line", "token: 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a3928", "the value of token"),
    ("quoted JSON-ish text", 'config {"client_secret": "abc123xyz", "x": 1', "abc123xyz", "the value of client_secret"),
    ("YAML", "auth:\n  api_key: Zx81kLmq02PpR\n", "Zx81kLmq02PpR", "the value of api_key"),
    ("GitLab token", "glpat-abcdefghijklmnopqrstuvwx", "glpat-abcdefghij", "a GitLab token"),
    ("npm token", "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghij",
     "an npm token"),
    ("Groq key", "GROQ=gsk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", "gsk_abcdefghij", "a Groq key"),
    ("HTTP basic credentials", "> Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA", "basic credentials"),
    ("a cookie header line", "HTTP/1.1 200\nSet-Cookie: sessionid=38afes7a8; HttpOnly\n", "38afes7a8", "a cookie"),
]
ORDINARY = [
    "max_tokens: 1024", "prompt_tokens: 1234, completion_tokens: 56", "The password must be at least 8 characters.",
    "token: Hello", "api_key = os.environ['OPENAI_API_KEY']", "password=None", "Use PASSWORD=<your password> here",
    "secret: true", "token_count=5", "self.api_key = api_key", "Client(api_key=api_key)", "password: str",
    "export OPENAI_API_KEY=$KEY", "TOKEN=${TOKEN}", "DATABASE_URL=postgres://localhost/app", "http://user@host/path",
    "tokenizer: bert-base-uncased", "the access token expires in 3600 seconds", "auth_token: <redacted>",
    "password: ********", "grep -r 'export default' src", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQY\n",
    "Basic understanding of Python is enough", "the cookie: a biscuit",
]
# fmt: on


def _with_result(text: str):
    trace = SCENARIOS["one_tool_round"].record()
    r0 = trace.rounds[0]
    return replace(
        trace,
        rounds=(replace(r0, executions=(replace(r0.executions[0], result=text),)), *trace.rounds[1:]),
    )


@pytest.mark.parametrize(("shape", "text", "secret", "what"), SECRETS, ids=[s[0] for s in SECRETS])
def test_each_secret_shape_is_removed_and_marked(tmp_path, shape, text, secret, what) -> None:
    assert secret in text
    assert secret_warnings({"result": text}), shape
    saved = load(save(_with_result(text), tmp_path / "t.json"))
    result = saved.rounds[0].executions[0].result
    assert secret not in (tmp_path / "t.json").read_text()
    assert f"[REDACTED: {what}]" in result
    assert scrub_text(result) == (result, [])  # a mark is never taken for a secret again
    assert any(
        r.startswith("rounds[0].tool_executions[0].result") and what in r for r in saved.metadata.redactions
    )
    assert not secret_warnings(saved.to_dict())


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_stays_as_it_was(text) -> None:
    assert scrub_text(text) == (text, [])
    assert secret_warnings({"result": text}) == []


def test_the_rest_of_the_text_stays_byte_for_byte() -> None:
    text = "user=admin\nOPENAI_API_KEY=myverysecretvalue123\nurl=https://admin:S3cretPassw0rd@db:5432/x # ok"
    cleaned, found = scrub_text(text)
    assert cleaned == (
        "user=admin\nOPENAI_API_KEY=[REDACTED: the value of OPENAI_API_KEY]\n"
        "url=https://admin:[REDACTED: a password in a URL]@db:5432/x # ok"
    )
    assert found == ["a password in a URL", "the value of OPENAI_API_KEY"]


def test_record_strips_secrets_a_tool_printed() -> None:
    """The tester's case: tool results holding `password=hunter2` and a DATABASE_URL with a password
    were stored by `record`."""
    from toolcall_lab.models import ScriptedModel, ScriptedResponse

    def show_env(name: str) -> str:
        return "password=hunter2\nDATABASE_URL=postgres://admin:Sup3rS3cret@db.internal:5432/app\nDEBUG=1"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("show_env", {"name": ".env"}),)), "done"])
    trace = asyncio.run(record(model, [show_env], "what is configured?", title="env"))
    text = dumps(trace)
    assert "hunter2" not in text and "Sup3rS3cret" not in text and "DEBUG=1" in text
    assert trace.rounds[0].executions[0].result == (
        "password=[REDACTED: the value of password]\n"
        "DATABASE_URL=postgres://admin:[REDACTED: a password in a URL]@db.internal:5432/app\nDEBUG=1"
    )
    assert len(trace.metadata.redactions) == 4  # the result, and the request that sent it back


# --- issue 13, seventh pass (t13 finding 1): a secret inside a JSON string, whatever escapes write it ---

# (what comes before the secret and stays, the secret, what the mark says)
_FORMS = [
    ("x-api-key: ", "the value of x-api-key"),
    ("api-key: ", "the value of api-key"),
    ("api_key: ", "the value of api_key"),
    ("password=", "the value of password"),
    ("token: ", "the value of token"),
]
_TOKEN = st.from_regex(r"[a-z]{3}[0-9]{3}[A-Za-z0-9]{10,24}", fullmatch=True)
# letters that spell no credential name nor key prefix, and every character JSON must or may escape
_FILLER = st.text(alphabet=st.sampled_from(list("abcxyz0189 \"'\\/\n\t\r\x00\x1f\b\fé€😀<>&{}[]:,;#")))
_AFTER = st.sampled_from([" ", '"', "'", "\\", "\n", ",", ";", ""])


def _escapes(ch: str) -> list[str]:
    """Every way JSON may write `ch` inside a string literal."""
    ways = []
    if ch not in '"\\' and ord(ch) >= 0x20:
        ways.append(ch)
    short = {
        '"': '\\"',
        "\\": "\\\\",
        "/": "\\/",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
    }
    if ch in short:
        ways.append(short[ch])
    code = ord(ch)
    if code > 0xFFFF:
        code -= 0x10000
        ways.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04X}")
    else:
        ways.append(f"\\u{code:04x}")
    return ways


@st.composite
def _encoded(draw: st.DrawFn, text: str) -> str:
    return "".join(draw(st.sampled_from(_escapes(ch))) for ch in text)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), form=st.sampled_from(_FORMS), token=_TOKEN, before=_FILLER, after=_FILLER, stop=_AFTER)
def test_a_secret_in_a_json_string_changes_only_itself_whatever_the_escapes(
    data, form, token, before, after, stop
):
    """The tester's case was `curl -H "x-api-key: ..."` in a Bash call's arguments: the mark took the
    backslash of the closing `\\"`, the arguments no longer parsed and the replay diverged. Now any
    JSON-encoded string keeps valid JSON and changes exactly the secret, every other byte (escapes
    written any way JSON allows) as it was."""
    head, what = form
    before = before + " "  # a separator: the name is a name, not the end of a word
    after = stop + after if stop else ""
    pieces = [data.draw(_encoded(t)) for t in (before + head, token, after)]
    wrap = data.draw(
        st.sampled_from(['{"command": %s}', '[1, {"a": [%s]}]', "%s", '{"x": {"y": %s}, "z": 2}'])
    )
    raw = wrap % ('"' + "".join(pieces) + '"')
    assert json.loads(raw)  # a valid JSON text to start with
    cleaned, notes = redact(raw, "arguments")
    mark = f"[REDACTED: {what}]"
    assert cleaned == wrap % ('"' + pieces[0] + mark + pieces[2] + '"')
    assert json.loads(cleaned)
    assert [n.rsplit(": ", 1)[-1] for n in notes] == [what]


_KEYS = st.sampled_from(["command", "api_key", "password", "x-api-key", "headers", "q", "secret"])
_TEXTS = st.one_of(
    st.text(),
    st.builds(lambda a, t, b: f"{a} Authorization: Bearer {t}{b}", st.text(), _TOKEN, st.text()),
    st.builds(lambda a, t: f'{a} curl -H "x-api-key: {t}" https://x', st.text(), _TOKEN),
    st.builds(lambda t: json.dumps({"password": t, "n": [t]}), _TOKEN),  # JSON inside JSON
)
_DOCS = st.recursive(
    st.one_of(_TEXTS, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(doc=_DOCS, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_redacting_json_text_is_redacting_its_values(doc, ascii_only, indent) -> None:
    """Redacting a JSON text gives the JSON of the redacted value, and the same removals, whatever
    the value: the text stays valid JSON in every escape context."""
    raw = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    cleaned, notes = redact(raw, "x")
    expected, expected_notes = redact(doc, "x")
    assert json.loads(cleaned) == expected
    assert sorted(n.rsplit(": ", 1)[-1] for n in notes) == sorted(
        n.rsplit(": ", 1)[-1] for n in expected_notes
    )
    if not notes:
        assert cleaned == raw


def _bash_session(tmp_path: Path, command: str) -> Path:
    """A Claude Code transcript (our own bytes): one Bash call and its result, then the answer."""
    base = {"sessionId": "0d3a4c1e-0000-4000-8000-00000000beef", "cwd": "/w", "version": "1.0.80"}
    lines = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "timestamp": "2025-07-01T10:00:00.000Z",
            "message": {"role": "user", "content": "fetch it"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "timestamp": "2025-07-01T10:00:02.000Z",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command}}
                ],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "timestamp": "2025-07-01T10:00:03.000Z",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": False}
                ],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "u2",
            "timestamp": "2025-07-01T10:00:05.000Z",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [{"type": "text", "text": "Done."}],
            },
        },
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_claude_code_call_with_a_key_in_a_header_still_replays_after_save(tmp_path) -> None:
    """End to end, the tester's cc_sec.jsonl: the import saved, validated and replayed a trace whose
    redacted arguments no longer parsed (`invalid arguments for 'Bash'`)."""
    from toolcall_lab.importers import import_claude_code, write_result
    from toolcall_lab.replay import replay

    session = _bash_session(tmp_path, 'curl -H "x-api-key: abcd1234secretvalue9876" https://x')
    (path,) = write_result(import_claude_code(session), tmp_path / "out")
    assert "abcd1234secretvalue9876" not in path.read_text()
    trace = load(path)
    args = json.loads(trace.rounds[0].tool_calls[0].arguments)
    assert args == {"command": 'curl -H "x-api-key: [REDACTED: the value of x-api-key]" https://x'}
    assert replay(trace).status == "completed"
