//! The servers' prompts, resources and completions through roster: the official Python SDK client over
//! stdio against `roster serve` fronting the Python SDK conformance fixture (which offers
//! prompts, static resources and a resource template). Names are prefixed (`always`), so a
//! prompt that reaches the fixture under its own name proves the route back.

mod common;

use std::process::Command;

use serde_json::Value;

const CLIENT: &str = r#"
import json, sys
import anyio
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

roster, config = sys.argv[1], sys.argv[2]

def dump(x):
    return x.model_dump(mode="json", by_alias=True, exclude_none=True)

async def main():
    server = StdioServerParameters(command=roster, args=["--config", config, "serve"])
    out = {}
    async with Client(server, mode="legacy", cache=None) as client:
        out["prompts"] = dump(await client.list_prompts())
        out["simple"] = dump(await client.get_prompt("fixture__test_simple_prompt"))
        out["with_args"] = dump(await client.get_prompt(
            "fixture__test_prompt_with_arguments", {"arg1": "alpha", "arg2": "beta"}))
        out["resources"] = dump(await client.list_resources())
        out["templates"] = dump(await client.list_resource_templates())
        out["static"] = dump(await client.read_resource("test://static-text"))
        out["templated"] = dump(await client.read_resource("test://template/42/data"))
        out["complete_prompt"] = dump(await client.complete(
            PromptReference(type="ref/prompt", name="fixture__test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"}))
        out["complete_template"] = dump(await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data"),
            {"name": "id", "value": "4"}))
        for key, call in [
            ("unknown_prompt", client.get_prompt("fixture__nope")),
            ("unknown_resource", client.read_resource("test://nowhere")),
            ("unknown_completion", client.complete(
                PromptReference(type="ref/prompt", name="fixture__nope"), {"name": "x", "value": ""})),
        ]:
            try:
                await call
                out[key] = {"answered": True}
            except MCPError as e:
                out[key] = {"code": e.error.code, "message": e.error.message}
    print(json.dumps(out))

anyio.run(main)
"#;

fn run_client() -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    let fixture = common::workspace_root().join("tests/python/conformance_server.py");
    let text = format!(
        "[gateway]\nnaming = \"always\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n\n\
         [servers.fixture]\ncommand = {py:?}\nargs = [{fixture:?}]\n",
        state = dir.path().join("state"),
        py = common::python(),
    );
    std::fs::write(&config, text).expect("write config");
    let output = Command::new(common::python())
        .args(["-c", CLIENT])
        .arg(env!("CARGO_BIN_EXE_roster"))
        .arg(&config)
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "client printed no report ({e}); stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The string `field` of each entry of the list `list[key]` (`{"prompts": [..]}`).
fn each<'a>(list: &'a Value, key: &str, field: &str) -> Vec<&'a str> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {list}"))
        .iter()
        .filter_map(|entry| entry[field].as_str())
        .collect()
}

fn texts(messages: &Value) -> Vec<String> {
    messages["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn prompts_and_resources_are_listed_and_routed_back() {
    let report = run_client();

    let prompts = each(&report["prompts"], "prompts", "name");
    assert!(
        prompts.contains(&"fixture__test_simple_prompt")
            && prompts.contains(&"fixture__test_prompt_with_arguments"),
        "prompts under exposed names: {prompts:?}"
    );
    assert!(!prompts.contains(&"test_simple_prompt"), "{prompts:?}");

    assert_eq!(
        texts(&report["simple"]),
        vec!["This is a simple prompt for testing."]
    );
    let with_args = texts(&report["with_args"]).join(" ");
    assert!(
        with_args.contains("alpha") && with_args.contains("beta"),
        "arguments reached the server: {with_args}"
    );

    let uris = each(&report["resources"], "resources", "uri");
    assert!(
        uris.contains(&"test://static-text") && uris.contains(&"test://static-binary"),
        "{uris:?}"
    );
    let templates = each(&report["templates"], "resourceTemplates", "uriTemplate");
    assert_eq!(templates, vec!["test://template/{id}/data"]);

    let static_text = &report["static"]["contents"][0];
    assert_eq!(static_text["uri"], "test://static-text");
    assert_eq!(
        static_text["text"],
        "This is the content of the static text resource."
    );
    let templated = &report["templated"]["contents"][0];
    assert_eq!(templated["uri"], "test://template/42/data");
    assert!(
        common::str_contains(&templated["text"], "42"),
        "the template's server read it: {templated}"
    );

    // Completions reach the prompt's server under its own name, and the template's server.
    assert_eq!(
        report["complete_prompt"]["completion"]["values"],
        serde_json::json!(["paris", "park", "party"]),
        "{report}"
    );
    assert_eq!(
        report["complete_template"]["completion"]["values"],
        serde_json::json!(["42"]),
        "{report}"
    );
    assert_eq!(report["unknown_completion"]["code"], -32602, "{report}");

    assert_eq!(report["unknown_prompt"]["code"], -32602, "{report}");
    assert_eq!(report["unknown_resource"]["code"], -32002, "{report}");
}
