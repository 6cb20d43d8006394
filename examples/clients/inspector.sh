#!/usr/bin/env bash
# The MCP Inspector's CLI against `awb start` over stdio, from the same `mcpServers` config that Claude
# Desktop, Claude Code and Cursor read: craft, call, search, equip, call directly. Needs Node.js (npx).
#
#     bash examples/clients/inspector.sh
#
# Every Inspector call starts the server afresh and lists tools anew, so an equipped tool is simply there.
set -euo pipefail
AWB="${WORKBENCH_BIN:-awb}"  # the awb executable; a fresh workspace per run
workspace="$(mktemp -d)"
"$AWB" init "$workspace" > /dev/null
cat > "$workspace/mcp.json" <<JSON
{"mcpServers": {"workbench": {"command": "$AWB", "args": ["start", "--transport", "stdio", "--config", "$workspace/awb.config.json"]}}}
JSON

export MCP_INSPECTOR_SECRET_STORE=memory  # no OS keychain needed: this server has no secrets
inspect() { npx --yes @modelcontextprotocol/inspector@2.12.0 --cli --config "$workspace/mcp.json" --server workbench "$@" 2> /dev/null; }
pick() {  # print one field of the JSON on stdin, e.g. `pick structuredContent.name`
    python3 -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    value = value[int(key)] if key.isdigit() else value[key]
print(value if isinstance(value, str) else json.dumps(value, sort_keys=True))' "$1"
}

echo "craft: $(inspect --method tools/call --tool-name awb_craft --tool-arg name=word_count \
    'description=Count the words of a text and find the longest one' \
    "code=def run(params):
    words = params['text'].split()
    return {'words': len(words), 'longest': max(words, key=len)}" \
    'input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}' \
    'output_schema={"type": "object", "properties": {"words": {"type": "integer"}, "longest": {"type": "string"}}}' \
    'examples=[{"params": {"text": "a bb"}, "expected": {"words": 2, "longest": "bb"}}]' \
    | pick structuredContent.name)"
echo "call: $(inspect --method tools/call --tool-name awb_call --tool-arg name=word_count 'params={"text": "to be or not"}' \
    | pick structuredContent.result)"
echo "search: $(inspect --method tools/call --tool-name awb_search --tool-arg 'query=count words in a text' \
    | pick structuredContent.results.0.name)"
echo "equip: $(inspect --method tools/call --tool-name awb_equip --tool-arg name=word_count | pick structuredContent.equipped_tools)"
echo "listed: $(inspect --method tools/list | python3 -c 'import json, sys; print("word_count" in [t["name"] for t in json.load(sys.stdin)["tools"]])')"
echo "direct: $(inspect --method tools/call --tool-name word_count --tool-arg 'text=the quick brown fox' | pick structuredContent)"
