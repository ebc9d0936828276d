// A bearer token source for connect(): a token is made once and reused for `reuseMs`, then
// made again; callers that ask while one is being made share it, and a failure is not kept.
export function reusableToken(make: () => Promise<string>, reuseMs: number, now: () => number = Date.now): () => Promise<string> {
  let cached: { token: string; at: number } | undefined;
  let pending: Promise<string> | undefined;
  return async () => {
    const at = now();
    if (cached && at - cached.at < reuseMs) return cached.token;
    pending ??= make().then(
      (token) => {
        cached = { token, at };
        pending = undefined;
        return token;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
}
