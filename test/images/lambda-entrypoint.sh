#!/bin/sh
# The Lambda image's entrypoint (local/base-images.ts): its one argument is the function's handler
# (module.export). In Lambda, AWS_LAMBDA_RUNTIME_API names the runtime API and the runtime starts at once;
# elsewhere the runtime interface emulator serves that API (and the invoke URL) and starts the runtime.
if [ "$#" -ne 1 ]; then
  echo "lambda-entrypoint.sh: expected one argument, the handler (module.export), got $#" >&2
  exit 142
fi
export _HANDLER="$1"
if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
  exec /var/runtime/bootstrap
fi
exec /usr/local/bin/aws-lambda-rie /var/runtime/bootstrap
