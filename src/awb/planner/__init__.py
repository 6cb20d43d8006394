"""The code-mode planner: one task string in, a structured result out.

Tools from every connected MCP server are found with `search_tools`, called directly or from one Python
plan that runs in the sandbox (`run_python_plan`), and large results enter the model's context only as
summaries (`summarize_payload`), after secrets are masked (`redact_payload`).
"""
