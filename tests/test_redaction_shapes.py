"""Secret shapes a second fresh-eyes tester found left in saved and recorded traces (issue 13, B18):
each is removed and marked wherever it occurs in text, and ordinary text that merely looks alike
stays byte for byte."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from toolcall_lab.record import record
from toolcall_lab.redaction import scrub_text
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
