#!/usr/bin/env python3
"""What `sam local invoke -t TEMPLATE --env-vars ENV_JSON --docker-network host <Function>` would hand to the
Lambda container, for every function of TEMPLATE, resolved by SAM CLI's own code: this machine has no container
engine, so it stops where SAM would start one (test/unit/sam.test.ts; docs/contributing/invoking-locally.md#with-docker-sam).

usage: resolve.py TEMPLATE ENV_JSON PROJECT_DIR
Prints one JSON line per function and a JSON summary; exits 1 if anything would break the command of docs/contributing/invoking-locally.md."""
import json, logging, os, re, sys, time
from pathlib import Path

from samcli.commands.local.cli_common import invoke_context
from samcli.commands.local.cli_common.invoke_context import InvokeContext
from samcli.local.docker.lambda_image import Runtime
from samcli.local.lambdafn.exceptions import FunctionNotFound

# Values SAM gives references to the stack's resources (its pseudo-parameters: an account and a URL suffix that name
# nothing real): a variable still holding one after env.json would send the function to a resource that is not there.
PLACEHOLDERS = (".localhost/", "123456789012")

# Both connect to the engine: the container manager, and the warm runtime that the lambda_runtime property builds
# beside the cold one `sam local invoke` uses. Nothing else is left out.
invoke_context.WarmLambdaRuntime = lambda *args, **kwargs: None


class NoEngine(InvokeContext):
    @staticmethod
    def _get_container_manager(docker_network, skip_pull_image, shutdown):
        return None


def main(template, env_file, project):
    started, messages = time.monotonic(), []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append((record.levelname, record.getMessage()))
    logging.getLogger("samcli").addHandler(handler)
    logging.getLogger("samcli").setLevel(logging.INFO)
    # The values for every function ("Parameters"), and a function's own section (by construct or logical id) over them.
    sections = json.loads(Path(env_file).read_text())
    # SAM drops an env.json value for a variable the template does not declare (test/unit/sam-env.test.ts's scan).
    read = {m for sub in ("functions", "shared") for path in Path(project, sub).rglob("*.ts")
            for m in re.findall(r"(?:OUTRIGGER|POWERTOOLS)_[A-Z_]+|AWS_ENDPOINT_URL_[A-Z_]+", path.read_text())}
    # The raw template: SAM's normalizer fills in a SamResourceId (the logical id) where the template has none.
    resources = json.loads(Path(template).read_text())["Resources"]
    functions = {lid: r.get("Metadata", {}) for lid, r in resources.items()
                 if r["Type"] in ("AWS::Lambda::Function", "AWS::Serverless::Function")}
    failures, rows = [] if functions else ["the template has no function"], []
    # do_cli's arguments for `-t TEMPLATE --env-vars ENV_JSON --docker-network host`, the rest their defaults; the CLI
    # makes -t absolute, and a relative one would put the asset directories under the template's directory twice.
    with NoEngine(template_file=os.path.abspath(template), function_identifier=None, env_vars_file=env_file,
                  docker_network="host") as ctx:
        runner, runtime = ctx.local_lambda_runner, ctx.lambda_runtime
        seen = sorted(f.name for f in ctx._function_provider.get_all())
        if seen != sorted(functions):
            failures.append(f"SAM sees the functions {seen}, the template has {sorted(functions)}")
        for logical_id, metadata in sorted(functions.items()):
            # The docs name a function by its construct id, the part of its path before "Resource".
            path = metadata.get("aws:cdk:path", "")
            cid = metadata.get("SamResourceId") or (path.split("/")[-2] if path.endswith("/Resource") else logical_id)
            row = {"construct_id": cid, "logical_id": logical_id, "problems": []}
            rows.append(row)
            if not path:
                row["problems"].append("no aws:cdk:path: not synthesized as cdk synth does (aws:cdk:enable-path-metadata)")
            if "SamResourceId" not in metadata:
                row["problems"].append(f"no SamResourceId in its Metadata (aws:cdk:path {path})")
            elif path.endswith("/Resource") and path.split("/")[-2] != cid:
                row["problems"].append(f"SamResourceId {cid} is not the construct id in {path}")
            try:
                found = runner.get_function(cid).name
                if found != logical_id:
                    row["problems"].append(f"sam local invoke {cid} finds {found}")
            except FunctionNotFound:
                row["problems"].append(f"sam local invoke {cid}: not found by construct id")
            fn = runner.get_function(logical_id)  # the rest as `sam local invoke <LogicalId>` sees it
            config = runner.get_invoke_config(fn)
            env = config.env_vars.resolve()  # what LambdaRuntime.create passes to the container
            code_dir = runtime._get_code_dir(config.code_abs_path)
            layers = runtime._image_builder.layer_downloader.download_all(
                [runtime._unarchived_layer(layer) for layer in config.layers])
            declared = set(fn.environment["Variables"])
            overrides = {**sections.get("Parameters", {}), **sections.get(cid, {}), **sections.get(logical_id, {})}
            row.update(handler=config.handler, runtime=config.runtime, architecture=config.architecture,
                       image=f"public.ecr.aws/lambda/{Runtime.get_image_name_tag(config.runtime, config.architecture)}",
                       code_dir=code_dir, layers=[layer.codeuri for layer in layers], env=env)
            if not Path(code_dir, "index.js").is_file():
                row["problems"].append(f"no index.js in {code_dir}")
            if config.handler != "index.handler":
                row["problems"].append(f"handler {config.handler}, not index.handler")
            # Layers are mounted at /opt: the clusters file must be one of theirs.
            clusters = env.get("OUTRIGGER_CLUSTERS_FILE") or ""
            if not clusters.startswith("/opt/") or not any(Path(l.codeuri, clusters[5:]).is_file() for l in layers):
                row["problems"].append(f"OUTRIGGER_CLUSTERS_FILE {clusters!r} is in no layer")
            for name, value in overrides.items():
                if name not in declared:
                    row["problems"].append(f"{name} (env.json) is not declared: SAM drops it")
                elif env.get(name) != value:
                    row["problems"].append(f"{name} is {env.get(name)!r}, env.json says {value!r}")
            row["problems"] += [f"{name} is read by the code, not declared" for name in sorted(read - declared)]
            # The template's variables only: SAM's own AWS_ACCOUNT_ID is always 123456789012, and no function reads it.
            for name in sorted(declared):
                value = env.get(name)
                if not isinstance(value, str) or any(p in value for p in PLACEHOLDERS):
                    row["problems"].append(f"{name} is {value!r} (a value SAM made up)")
    for row in rows:
        print(json.dumps(row, sort_keys=True))
        failures += [f"{row['construct_id']}: {p}" for p in row["problems"]]
    warnings = sorted({m for level, m in messages if level == "WARNING"})
    print(json.dumps({"functions": len(rows), "failures": failures, "sam_warnings": warnings[:5],
                      "seconds": round(time.monotonic() - started, 2)}))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
