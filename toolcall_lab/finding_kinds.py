"""Every kind of parser finding: its severity, what it means, and an example message.

This table is the one reference users read: the README's finding table is generated from it
(`reference_markdown`, checked by a test), and `toolcall-lab findings` prints it. Severities:
``info`` = a known provider quirk, handled; ``warning`` = something was odd and a choice was made
(the message says which); ``error`` = a call or response is unusable as it stands (such calls are
marked incomplete and never executed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class KindInfo:
    severity: Severity
    meaning: str
    example: str


FINDING_KINDS: dict[str, KindInfo] = {
    # -- framing: SSE and JSON-lines files ------------------------------------------------------
    "sse_nonstandard_line": KindInfo(
        "info",
        "A line has whitespace before a known field name (` data: {...}`). The SSE standard would "
        "ignore it as an unknown field; it is read as that field instead, so no payload is lost.",
        "line 1: ' data' has whitespace before the field name; read as 'data'",
    ),
    "sse_unknown_field": KindInfo(
        "info",
        "A line whose field is not data/event/id/retry (nor llama.cpp's `error`); ignored, as the "
        "SSE standard says. Shown because a server may have meant it as data.",
        "line 9: unknown SSE field 'result' ignored: 'result: {\"x\": 1}'",
    ),
    "sse_ignored_data": KindInfo(
        "warning",
        "A field that looks like `data` in another case (`Data:`, `DATA:`) was ignored: SSE field names "
        "are case-sensitive (WHATWG), so its payload, and any call in it, is not read. The message "
        "quotes the line.",
        "line 3: a field that looks like data ('Data') was ignored: SSE field names are case-sensitive, "
        'so its payload is not read: \'Data: {"id": "x", ...\'',
    ),
    "sse_raw_json": KindInfo(
        "warning",
        "JSON text on lines without the `data:` field name inside an event stream (JSON lines saved "
        "in an SSE file, a raw error body written mid-stream). The standard would drop it; it is read "
        "as one event's data (up to the next blank line or field) so no payload or error is lost.",
        "line 4: JSON text without the `data:` field name; read as the data of one event",
    ),
    "sse_stray_text": KindInfo(
        "warning",
        "A line that is not an SSE field at all (HTML, plain text, a fragment); ignored as the standard "
        "says, quoted so what it held is not lost unseen.",
        "line 7: text that is not an SSE field ignored: '<html><body>502 Bad Gateway'",
    ),
    "sse_unterminated_event": KindInfo(
        "info",
        "The file ends inside an event (no blank line after its last `data:` line). The standard "
        "discards such an event; a recording that was cut there is read to its end instead.",
        "line 42: the file ends without the blank line that closes this event; read anyway",
    ),
    "invalid_utf8": KindInfo(
        "warning",
        "Bytes that are not UTF-8 were replaced by U+FFFD, as the SSE standard decodes them. A call "
        "whose arguments hold a U+FFFD in a response with such bytes is held back (`call_held_back`, "
        "naming it): its arguments may not be what the model sent.",
        "line 3: bytes that are not valid UTF-8 replaced by U+FFFD",
    ),
    "unreadable_data": KindInfo(
        "error",
        "Part of a recording cannot be read (data that is not JSON, a body that does not decompress or "
        "has an unknown shape). The response it belongs to is marked with `error` and its calls "
        'incomplete; the other responses of the file are read (`errors="keep"`, the CLI).',
        "interaction 1: the body does not decompress as gzip (Not a gzipped file (b'{\"'))",
    ),
    "data_after_done": KindInfo(
        "info",
        "Payloads follow `data: [DONE]`: a second response in the same file; read as a new response.",
        "line 30: data after [DONE]; read as response 1",
    ),
    "data_after_error": KindInfo(
        "warning",
        "Payloads follow a provider error inside a stream (the error ended its response): read as a "
        "new response, so what the server sent after its error is not lost unseen.",
        "line 12: data after the provider error that ended response 0; read as response 1",
    ),
    "new_stream_without_done": KindInfo(
        "warning",
        "Two chat streams saved one after the other without `[DONE]`: after a choice's `finish_reason`, "
        "a chunk with another `id` starts a new response (rule: the id changes after a finish reason; "
        "without ids the chunks stay in one response, reported as `late_delta` / `index_reused`).",
        "line 9: a chunk with id 'chatcmpl-B' after response 'chatcmpl-A' finished, with no [DONE] "
        "between them; read as response 1",
    ),
    # -- payloads ---------------------------------------------------------------------------------
    "malformed_chunk": KindInfo(
        "warning",
        "A payload or part of one does not have the shape its format defines (a chat payload with no "
        "`choices` that is not a usage or metadata chunk, a choice with no `delta`, a part that is not "
        "an object, a required part missing, an Anthropic block start without `index`); that part is "
        "skipped and the message quotes what it held. When it may have held a call's data (a key such "
        "as `tool_calls` or `arguments`), the calls of the response it may belong to are held back "
        "(`call_held_back`), never run without it.",
        'chunk 4: a tool_calls entry is a string, not an object; skipped ("{\\"index\\": 0}"); it may '
        "hold tool call data, so every call of this response is held back",
    ),
    "wrong_type": KindInfo(
        "warning",
        "A field holds a JSON value of another type than its format defines, or none where a default "
        "is read: text or a finish reason that is a number or an object, an index sent as a decimal "
        'string (`"0"`) or a whole number with a fraction (`0.0`), a choice without `index`, '
        "`tool_calls` or `choices` as one object instead of a list, an id or name that is not a string "
        "(a number is read as its text; any other value is quoted in the message and read as absent: "
        "a fallback id, or no name, so the call never runs). Read as the message says (text kept as "
        'compact JSON, `"0"` as 0, one object as a list of one), never dropped unseen.',
        'chunk 3: finish_reason {"type":"stop"} is an object, not a string; kept as its JSON text',
    ),
    "content_parts": KindInfo(
        "info",
        'A chat message\'s `content` came as a list of typed parts (`[{"type": "text", "text": '
        "...}]`, as Mistral's reasoning models send it) instead of a string: the text parts are joined "
        "as the content, `thinking` parts as the reasoning; a part of another type is kept as compact "
        "JSON in the content (`wrong_type`).",
        "choice 0: content came as a list of parts in 12 chunk(s); their text joined",
    ),
    "event_before_start": KindInfo(
        "warning",
        "An Anthropic content event came before `message_start`; read as part of the message that "
        "starts after it (pings before `message_start` are normal and not reported).",
        "chunk 0: content_block_start before message_start; read as part of that message",
    ),
    "chunk_as_body": KindInfo(
        "warning",
        "A whole body that is one stream chunk (`choices[].delta`, `chat.completion.chunk`): read as a "
        "stream of that one chunk, so its calls follow the streaming rules (no finish reason: empty "
        "arguments are incomplete).",
        "the body is a single stream chunk (choices carry `delta`, not `message`); read as a stream "
        "of one chunk",
    ),
    "extra_choices": KindInfo(
        "warning",
        "The response has more than one choice (`n > 1`). Every choice is parsed, but "
        "`response.tool_calls`, `to_message()` and the run loop use choice 0 (the lowest-numbered "
        "choice) only; this says what the others hold. Entries for choices beyond the first 128 "
        "(OpenAI's largest `n`) that hold no call, text nor error are counted in one such finding, "
        "not kept, so memory does not grow with chunks that each name a new choice.",
        "the response has 2 choices; tool_calls and the run loop use choice 0 only (choice 1: 1 call)",
    ),
    "unknown_event": KindInfo(
        "info",
        "An Anthropic or Responses event type this parser does not know; ignored.",
        "unknown Anthropic event type 'content_block_pause' ignored",
    ),
    "unknown_block": KindInfo(
        "warning",
        "An Anthropic content block of a type this parser does not read (streamed or whole). One with an "
        "`id`, `name` or `input` looks like a call: the message says a call-like block was not read (no "
        "call is made of it, nothing runs). Deltas to such a block are reported under this kind too.",
        "chunk 1: block 0: a call-like content block of unknown type 'future_tool_use' (id/name/input: id "
        "'x_1', name 'f') was not read: no call is made of it, it will not be executed",
    ),
    "content_in_start": KindInfo(
        "warning",
        "An Anthropic `message_start` whose `message.content` holds blocks (the API sends it empty; a "
        "shim may send the whole message there): each block is read as one started at that point (a "
        "`tool_use` is a call, complete only when the message stops normally, as a block never "
        "closed; text is kept), and this says the shape was odd.",
        "chunk 0: message_start carries 1 content block(s) (tool_use); read as blocks of the message",
    ),
    "mixed_formats": KindInfo(
        "warning",
        "An event of another wire format in a stream (a chat chunk in an Anthropic stream, two recordings "
        "of different formats in one file). After the response ended, or when it starts a response "
        "(`message_start`, `response.created`), it is read as the next response in its own format; "
        "anywhere else it is skipped and quoted, and when it may hold call data every call of the "
        "response is held back (`call_held_back`).",
        "chunk 9: a chat-completion chunk, not an Anthropic event, after this response ended: the stream "
        "holds recordings of another wire format; read_recording / iter_responses read it as the next "
        "response, in its own format",
    ),
    "provider_error": KindInfo(
        "error",
        "The provider reported an error in the stream or instead of a response (an `error` object, "
        '`event: error`, llama.cpp\'s `error:` field, `finish_reason: "error"`, `response.failed`, '
        'FastAPI\'s `{"detail": ...}` as the whole payload). '
        "The message quotes the provider, names the calls in progress it marked incomplete, and quotes "
        "the model output the provider rejected when it sent it back (Groq's `failed_generation`).",
        "provider error at chunk 7: Provider disconnected unexpectedly; 1 call(s) in progress marked "
        "incomplete (call_1)",
    ),
    "unexpected_event": KindInfo(
        "warning",
        "Something arrived where the run did not expect it (tool calls in the final answer of a run "
        "that offered no tools); ignored.",
        "round 3: 1 tool call(s) in the final answer made without tools; ignored",
    ),
    # -- chat-completions deltas ------------------------------------------------------------------
    "missing_index": KindInfo(
        "info",
        "A tool-call delta without `index` (Mistral, Gemini): it continues the last call unless it "
        "starts a new one (a different id, or a new name after complete arguments). Reported when it "
        "starts a call, and once per call when it is read as part of the last of several calls (a guess).",
        "tool call delta without index; treated as call 1",
    ),
    "sparse_index": KindInfo(
        "info",
        "A choice's tool-call indices skip numbers (reported when the stream ends, naming the ones that "
        "never came; indices that only arrived out of order are not sparse); the wire indices are kept.",
        "choice 0: tool call indices skip 1, 2 (sparse indices kept)",
    ),
    "duplicate_index_in_chunk": KindInfo(
        "warning",
        "Two tool-call entries with the same index in one chunk; a different id makes it a new call.",
        "two tool call entries with index 0 in one chunk (a different id; kept as call 1)",
    ),
    "duplicate_tool_call_id": KindInfo(
        "warning",
        "Two calls of one response (or batch) carry the same provider id (buggy servers; also a client "
        "call and a server-side call such as Anthropic's `server_tool_use`), or a call reuses "
        "the id of a call of an earlier round: tool results matched by id would be crossed. The parser "
        "reports it on the response; the run loop runs each and answers it by position, so the tool "
        "messages repeat the id, and reports it on the round.",
        "round 2: the calls at positions [0, 1] share the id 'call_1'; each is run (or screened) and "
        "answered by position, so the tool messages repeat the id",
    ),
    "index_reused": KindInfo(
        "info",
        "A later delta reuses an index for a different call (Ollama sends index 0 for every call): a "
        "different id with a name, or a different id or name once the call's arguments are complete "
        "JSON, starts a new call. Anthropic: a `content_block_start` for a tool block at an index that "
        "already held one; the new block is a new call and later deltas at that index go to it.",
        "index 0 reused by a new call (id 'call_b', name 'get_time'); kept as call 1",
    ),
    "id_changed": KindInfo(
        "warning",
        "Continuation deltas of one call carry other ids (LM Studio sends a new id on every fragment), "
        "or a later form of a Responses item (`output_item.done`, `response.completed`) gives it another "
        "`call_id`; the first id is kept (answer the call under it, or check the provider's record).",
        "call 0: 40 later deltas carried other ids (first 'call_x'); kept 'call_a'",
    ),
    "repeated_header": KindInfo(
        "info",
        "The id and/or the full name is repeated on continuation deltas (OpenRouter/Novita); kept "
        "once, never concatenated.",
        "call 0: id/name repeated on continuation deltas (kept once, not concatenated)",
    ),
    "split_name": KindInfo(
        "info",
        "The function name arrived in pieces (`get_` + `weather`) and was joined. Rule: a name piece "
        "equal to the name so far is a repeat, one that starts with it replaces it (a snapshot), "
        "any other piece is appended. A name split into two equal halves reads as a repeat.",
        "call 0: function name arrived in 2 pieces, joined as 'get_weather'",
    ),
    "split_call": KindInfo(
        "warning",
        "A call's header (id, name) and its arguments came at different indexes (LibreChat's agents API "
        "numbers a header by its run step, counting text steps; LiteLLM's Bedrock path sends a "
        'no-argument call\'s `""` at another index). With one header without arguments and one '
        "argument fragment without id or name in the choice, they are read as one call; with more, "
        "the headers are held back (`call_held_back`), never run with `{}`.",
        "call toolu_1 (get_time): its header came at index 2 without arguments and its arguments at "
        "index 1 without id or name; read as one call",
    ),
    "duplicate_legacy_call": KindInfo(
        "warning",
        "A message carries both the deprecated `function_call` and a `tool_calls` entry with the same "
        "name and arguments; counted once (the `tool_calls` entry, which has an id).",
        "choice 0: function_call duplicates tool call call_1 (same name and arguments); counted once",
    ),
    "conflicting_legacy_call": KindInfo(
        "warning",
        "A choice carries both the deprecated `function_call` and `tool_calls`, and they say different "
        "calls (another name or other arguments); both are kept as sent, and which the model meant is "
        "for you to judge.",
        "choice 0: the deprecated function_call ('g') and the tool_calls ('f') say different calls; both "
        "kept, as sent",
    ),
    "name_changed": KindInfo(
        "warning",
        "A later form of a Responses item (`output_item.done`, the `response.completed` output) names "
        "a call differently than its announcement; the first name is kept (the one announced).",
        "call call_1 (item 'fc_1'): response.completed names it 'beta', it was announced as 'alpha'; "
        "kept the first",
    ),
    "late_name": KindInfo(
        "warning",
        "A chat call's name arrived after some of its arguments, in a later delta without a new id: "
        "it names that call (it does not start a new one, since the call had no name to differ from).",
        "call 0 (call_a): name 'f' arrived after its arguments; read as this call's name",
    ),
    "unknown_call_type": KindInfo(
        "error",
        "A chat `tool_calls` entry whose payload is not where a function call's is: a `type` this "
        "parser does not read (not `function` or `custom`; what `entry[type]` holds is kept), or an "
        "entry with no `function` object and keys other than `name` / `arguments` (`fn`, ...; the "
        "whole entry is kept). Kept raw as the call's arguments, the keys seen named; the call is "
        "marked incomplete, never run. Streamed and whole bodies alike.",
        "call call_1: a tool call entry with no `function` object (keys ['fn', 'id', 'index', 'type']); "
        "what it holds is kept raw as its arguments, the call marked incomplete and will not be executed",
    ),
    "flat_tool_call": KindInfo(
        "warning",
        "A chat `tool_calls` entry of type `function` (or no type) with `name` / `arguments` at its top "
        "level instead of inside `function`, and no other unknown key (some OpenAI-compatible servers): "
        "unambiguous, so read as the function's name and arguments, streamed or whole.",
        "call call_1 (f): name/arguments sent at the top level of the tool call entry, not inside "
        "`function`; read as the function's",
    ),
    "legacy_function_call": KindInfo(
        "info",
        "The deprecated `function_call` field (no id) was read as a tool call.",
        "choice 0: deprecated function_call read as call 0 (no id)",
    ),
    "arguments_not_string": KindInfo(
        "warning",
        "`arguments` arrived as JSON (an object, list, number) instead of a string; kept, serialised "
        "compactly.",
        "call 0: arguments sent as an object, not a string; kept, serialised compactly",
    ),
    # -- the calls themselves ---------------------------------------------------------------------
    "missing_id": KindInfo(
        "info",
        "A call without an id gets the fallback `call_{batch}_{index}`.",
        "call 0 came with no id; using fallback id call_0_0",
    ),
    "empty_id": KindInfo(
        "info",
        'A call whose id is `""` gets the fallback `call_{batch}_{index}`.',
        'call 0 came with an empty id (""); using fallback id call_0_0',
    ),
    "missing_name": KindInfo(
        "error",
        "A call without a function name: it cannot be run, so it is marked incomplete (its arguments "
        "are kept).",
        "call call_0_0 has no function name; marked incomplete and will not be executed",
    ),
    "double_encoded_arguments": KindInfo(
        "warning",
        "The arguments are a JSON string holding JSON; decoded once more for `args`, raw kept.",
        "call a (f): arguments are a JSON string holding JSON; decoded again",
    ),
    "empty_arguments": KindInfo(
        "info",
        "An empty argument string in a response that ended normally (a finish reason, a closed "
        "block), read as `{}` (tools without parameters). When the response did not end normally an "
        "empty string is not `{}`: the call is incomplete (`incomplete_arguments`).",
        "call a (f): empty argument string in a response that ended normally, read as {}",
    ),
    "incomplete_arguments": KindInfo(
        "error",
        "The arguments end where the JSON expected more (cut off), or none arrived before a response "
        "that did not end normally ended (no finish reason, the token limit, any reason that is not a "
        "normal end, an error); raw kept, call never executed.",
        "call b (get_time): no arguments arrived before the stream ended without a finish reason; "
        "call marked incomplete and will not be executed",
    ),
    "invalid_arguments": KindInfo(
        "error",
        "The arguments are not a JSON object; raw kept, call never executed.",
        "call a (f): arguments not valid JSON: Extra data at char 15; call marked incomplete",
    ),
    "duplicate_keys": KindInfo(
        "error",
        'An object of the arguments holds a key twice (`{"dest": "/tmp/safe", "dest": "/"}`). JSON '
        "readers silently keep the last value; which one the model meant is unknown, so the call is "
        "marked incomplete and never executed (`parse_arguments()` says why); raw kept.",
        "call call_1 (move): arguments the key 'dest' appears twice in one object (first \"/tmp/safe\", "
        'then "/"); which value the model meant is unknown; raw string kept, call marked incomplete',
    ),
    "unfinished_call": KindInfo(
        "error",
        "Nothing shows this call was finished: the response ended in a provider error, was filtered, "
        "or did not end normally (the token limit, `abort`, any reason not in the normal list) and the "
        "call's own structure does not close it (chat calls have no end marker; an Anthropic block "
        "not closed by `content_block_stop`, the last block of a message cut at `max_tokens`, closed or "
        "not; a Responses item never finished or whose own `status` is not `completed`). Its arguments "
        "may parse, or it is a custom tool's free-form input, but "
        "may be cut: marked incomplete, never executed.",
        "call call_c (shell): the response was cut at the token limit (finish_reason 'length'), and a "
        "custom tool's free-form input has no end of its own (it may be cut); marked incomplete",
    ),
    "split_surrogate_pair": KindInfo(
        "info",
        "A UTF-16 surrogate pair arrived split over two chunks (`\\ud83d` ... `\\ude00`); joined "
        "into the one character it encodes.",
        "call a: a surrogate pair split across chunks was joined",
    ),
    "lone_surrogate": KindInfo(
        "warning",
        "Text holds an escaped lone surrogate (legal JSON, not a character); kept, printed escaped.",
        "call a: arguments hold a lone surrogate \\ud83d; kept as is",
    ),
    "custom_tool_call": KindInfo(
        "info",
        "A custom tool call (Responses `custom_tool_call`, a chat `type: custom` entry): free-form text "
        "input, not JSON; kept as text. Complete only when the response ended normally or its item "
        "finished (`unfinished_call` otherwise).",
        "call call_1 (code_exec): custom tool with free-form input (kept as text, not JSON)",
    ),
    "builtin_tool_call": KindInfo(
        "info",
        "A Responses item for a built-in tool the client runs (`computer_call`, `local_shell_call`, "
        "`shell_call`, `apply_patch_call`): kept as a call of kind `builtin` named after the tool, its "
        "arguments the item's action as JSON. The run loop has no such tool and answers it as unknown.",
        "call call_7 (computer): built-in tool run by the client; arguments are its action",
    ),
    "server_tool_call": KindInfo(
        "info",
        "A tool the provider ran itself (Anthropic `server_tool_use`, Responses `web_search_call`, "
        "...); reported in `server_tool_calls`, never handed to the loop.",
        "server-side tool call srvtoolu_01 (web_search) reported separately; not a client call",
    ),
    # -- how a response ended ---------------------------------------------------------------------
    "no_finish_reason": KindInfo(
        "warning",
        "The stream ended without a finish reason / stop reason / `response.completed` (cut, or a "
        "server that never sends one, as OpenRouter/Novita do). In a chat stream, calls whose arguments "
        "form a JSON object are kept complete; calls with no arguments, custom calls, and Anthropic "
        "blocks or Responses items never closed are incomplete (`incomplete_arguments`, "
        "`unfinished_call`).",
        "choice 0: stream ended without a finish_reason",
    ),
    "finish_without_calls": KindInfo(
        "warning",
        'A choice finished with `finish_reason: "tool_calls"` (or `function_call`, Anthropic '
        "`tool_use`) but holds no call: the calls it announces were lost on the way or never sent.",
        "choice 0: finish_reason 'tool_calls' but no tool call was read",
    ),
    "length_finish": KindInfo(
        "warning",
        "The response stopped at the token limit (`length`, `max_tokens`, `MAX_TOKENS`, Mistral's "
        "`model_length`, `model_context_window_exceeded`): not a normal end, so calls nothing shows "
        "were finished are incomplete (`unfinished_call`).",
        "choice 0: finish_reason 'length' (output cut at the token limit); 1 call(s) marked incomplete",
    ),
    "filtered_finish": KindInfo(
        "error",
        'The provider stopped the response itself: `finish_reason: "content_filter"` (Azure, OpenAI), '
        "Anthropic's `stop_reason: \"refusal\"`, Gemini's `SAFETY` / `RECITATION` / ... Its output "
        "was withheld or cut, so its calls are kept but marked incomplete and never executed.",
        "choice 0: finish_reason 'content_filter' (the provider stopped or withheld the output); 1 "
        "call(s) marked incomplete",
    ),
    "abnormal_finish": KindInfo(
        "warning",
        "The response ended with a finish / stop reason that is not a normal end (`stop`, `tool_calls`, "
        "`function_call`, `end_turn`, `tool_use`, `stop_sequence`, `eos_token`) nor the token limit or a "
        "filter: `abort` (vLLM, SGLang), `cancelled`, `timeout`, `malformed_function_call`, "
        "`pause_turn`, any value nobody documented. The response was stopped before it ended: empty "
        "arguments are incomplete, and so is every call nothing shows was finished (`unfinished_call`).",
        "choice 0: finish_reason 'abort' is not a normal end (...): the response was stopped before it "
        "ended; 1 call(s) marked incomplete",
    ),
    "refusal": KindInfo(
        "warning",
        "The model refused (OpenAI's `refusal` text: a chat delta or message field, a Responses "
        "`refusal` content part or `response.refusal.delta`). It is not `content`; its text is quoted "
        "in the message (up to 1,000 characters), so it is not lost.",
        "choice 0: the model refused: \"I'm sorry, I can't help with that.\" (not part of content)",
    ),
    "incomplete_response": KindInfo(
        "warning",
        "A Responses `response.incomplete`; calls whose items did not finish are marked incomplete.",
        "response incomplete (max_output_tokens); 1 of 2 call(s) incomplete, never run",
    ),
    # -- Anthropic and Responses events -----------------------------------------------------------
    "orphan_delta": KindInfo(
        "warning",
        "An arguments delta for a block or item never announced (with no id to recover it). Responses: "
        "the deltas (and a `.done`) are kept as a call without name or id, incomplete, never run, and "
        "calls with no final arguments of their own are held back; Anthropic: skipped (the characters "
        "counted and quoted), and every `tool_use` call of the message is held back "
        "(`call_held_back`), since which one the text was for is unknown. An Anthropic `text_delta` "
        "for a block never opened: its text is kept, and reported.",
        "chunk 5: 3 arguments delta(s) for item 'fc_x', which was never announced; kept as call 1 "
        "without name or id (incomplete, never run)",
    ),
    "recovered_delta": KindInfo(
        "info",
        "A Responses arguments delta arrived before its item was announced; it was held and the call's "
        "final arguments (`.done` / `output_item.done`) supplied what it said, so nothing is lost.",
        "chunk 11: arguments delta for item 'fc_9' came before the item was announced; the final "
        "arguments of call call_Z were taken, nothing lost",
    ),
    "call_held_back": KindInfo(
        "error",
        "Something meant for a call could not be read as its arguments: an Anthropic `text_delta` or a "
        "delta of an unknown type into a `tool_use` block, a delta that is not an object, one without "
        "`index` while the block was open, an `input_json_delta` for a block never started; a chat "
        "payload or part of an unknown shape that may hold call data, a `function` that is not an "
        "object; Responses deltas for an item never announced; bytes of its arguments that were not "
        "UTF-8 (replaced by U+FFFD). What the call was to receive is unknown, so it is marked incomplete "
        "and never run.",
        "call toolu_1 (get_weather): chunk 3: a text_delta arrived in its tool_use block; call marked "
        "incomplete and will not be executed",
    ),
    "late_delta": KindInfo(
        "warning",
        "An arguments delta for a block already closed (Anthropic `content_block_stop`), or a chat "
        "delta (a call's or text) after its choice's `finish_reason`; appended to that call or text, "
        "since it is the model's output, and reported.",
        "chunk 6: input_json_delta for block 0 after its content_block_stop; appended to call t1",
    ),
    "unannounced_item": KindInfo(
        "warning",
        "A Responses item finished (`output_item.done`) or streamed without being announced; the call "
        "is taken from the event.",
        "chunk 9: output_item.done for item fc_1 never announced; call taken from it",
    ),
    "arguments_mismatch": KindInfo(
        "warning",
        "The final arguments (`.done`, `response.completed`) differ from the concatenated deltas; the "
        "final ones are kept.",
        "call call_1: function_call_arguments.done differs from the deltas; kept .done",
    ),
    "text_mismatch": KindInfo(
        "warning",
        "The final text of a Responses stream (`response.completed`, `output_item.done`, "
        "`content_part.done`, `output_text.done`: the latest form) differs from the concatenated text "
        "deltas; the final text is kept, as for arguments.",
        "the text deltas (5 characters) differ from the response.completed text (11 characters); kept "
        "the response.completed text",
    ),
    "not_in_completed": KindInfo(
        "warning",
        "A call the stream showed is missing from the `output` of `response.completed`: kept as "
        "streamed when its item finished (`.done`, `output_item.done`); when it never finished it is "
        "marked incomplete, never run (`response.completed` is authoritative over the stream).",
        "call call_2 (f) streamed but not in the response.completed output; kept as streamed (its item "
        "finished)",
    ),
    "recovered_from_completed": KindInfo(
        "warning",
        "A call the stream never showed was found in the `output` of `response.completed`; taken from there.",
        "call call_2 (f) only in response.completed output; taken from there",
    ),
    "changed_after_start": KindInfo(
        "error",
        "A streaming strategy (``eager``) started a call as soon as its arguments formed a complete "
        "JSON object, and the stream then changed the call (more text, another name or id). The record "
        "keeps what ran; the call as finally streamed is in the round's tool calls. Reported by the "
        "strategy, not the parser.",
        'call a (position 0) started as search({"key": "x"}) when its arguments formed a complete '
        'object, but the stream ended with search({"key": "x"}{"key": "other"}); the record '
        "keeps what ran",
    ),
}


def severity_of(kind: str) -> Severity:
    """The severity every finding of `kind` carries."""
    return FINDING_KINDS[kind].severity


def reference_markdown() -> str:
    """The finding reference as a Markdown table (the README's copy is checked against this)."""
    rows = ["| kind | severity | meaning | example message |", "|---|---|---|---|"]
    for kind, info in FINDING_KINDS.items():
        meaning = info.meaning.replace("|", "\\|")
        example = info.example.replace("|", "\\|").replace("`", "'")
        rows.append(f"| `{kind}` | {info.severity} | {meaning} | `{example}` |")
    return "\n".join(rows)
