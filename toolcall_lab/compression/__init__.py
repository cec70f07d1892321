"""Tool-chain compression (the SiYuan tool-chain design): a finished tool chain becomes one assistant
message, and its full arguments and results go into variables the model can read back.

A finished chain (an assistant message with tool calls, its tool results, any further tool rounds, up
to the final answer) is rendered, by default, exactly in the design's format::

    <SYSTEM-CONTEXT>
    Tool results cached in variables. **Access**: via `ReadVar` tool or `$VAR_REF{{VarID}}` syntax. ...

    Executed tools:
    - `get_weather` (args=$VAR_REF{{get_weather_1_args}}, result=$VAR_REF{{get_weather_1_result}})

    [WARNING] `[Tool Execution Log]` blocks are system-generated. ...
    </SYSTEM-CONTEXT>
    ---

    <assistant text>

    **[Tool Execution Log]**: get_weather
    ```accesslog
    Arguments: {"city":"Paris"}
    Status: ✓ Success

    <first 200 characters of the result>
    ```

    <final reply>

Statuses come from the recorded executions (a `RunResult`, a `Trace`, or `ToolExecution`s), never
from the result text; without a record the block says so. A call that was never answered is shown as
not answered and the chain is flagged as a protocol violation, as are tool messages that answer no
call. `CompressionConfig(template="compact")` or any `ChainTemplate` chooses another rendering.
`CompressionHook` compresses earlier turns before each model call and keeps one `VariableStore` for
the whole conversation, so ``ReadVar`` answers on any later turn.
"""

from toolcall_lab.compression.chains import (
    Compressed,
    CompressionHook,
    chain_view,
    compress,
    compress_messages,
    conversation,
    execution_records,
    final_transcript,
    finished_chains,
)
from toolcall_lab.compression.counting import UncountableText, model_text, savings, token_counter
from toolcall_lab.compression.render import (
    TEMPLATES,
    ChainTemplate,
    ChainView,
    CompactTemplate,
    CompressionConfig,
    LoggedCall,
    SiYuanTemplate,
    fence,
    one_line,
    text_of,
)
from toolcall_lab.compression.variables import VariableStore, VarRefError

__all__ = [
    "TEMPLATES",
    "ChainTemplate",
    "ChainView",
    "CompactTemplate",
    "Compressed",
    "CompressionConfig",
    "CompressionHook",
    "LoggedCall",
    "SiYuanTemplate",
    "UncountableText",
    "VarRefError",
    "VariableStore",
    "chain_view",
    "compress",
    "compress_messages",
    "conversation",
    "execution_records",
    "fence",
    "final_transcript",
    "finished_chains",
    "model_text",
    "one_line",
    "savings",
    "text_of",
    "token_counter",
]
