// cfn-lint (AWS's CloudFormation linter, MIT-0), from PyPI, in a virtualenv under the cache: it checks the
// synthesized template against the CloudFormation resource specification, beyond what CDK's types catch.
//   node local/cfn-lint.ts <template.json>...   runs it (installing it on first use, ignoring IGNORED_CHECKS)
//                                               and exits with its code: 0 when it found nothing
import { join } from 'node:path';
import { projectRoot } from './paths.ts';
import { capture, type Log } from './process.ts';
import { pythonTool } from './python.ts';

const requirements = join(projectRoot, 'test', 'cfn-lint', 'requirements.txt');

/**
 * Findings the project accepts. W3005 (a DependsOn already implied by a GetAtt) is how CDK orders every
 * function after its role and that role's policy; the duplicate costs nothing. Any other warning is a failure.
 */
export const IGNORED_CHECKS = ['W3005'];

/** Installs cfn-lint (once per requirements file and Python) and returns its executable. */
export async function ensureCfnLint(log: Log = () => {}): Promise<string> {
  return join(await pythonTool('cfn-lint', requirements, log), 'cfn-lint');
}

export interface CfnLintFinding {
  Level: 'Error' | 'Warning' | 'Informational';
  Message: string;
  Rule: { Id: string; Description: string };
  Location: { Path?: Array<string | number>; Start: { LineNumber: number } };
  Filename: string;
}

export interface CfnLintResult {
  /** cfn-lint's exit code: a bit mask, 2 for errors, 4 for warnings, 8 for informational findings. */
  code: number;
  findings: CfnLintFinding[];
}

/** Lints templates (skipping `ignore`, IGNORED_CHECKS by default). Throws when cfn-lint itself fails. */
export async function cfnLint(templates: string[], opts: { ignore?: string[]; log?: Log } = {}): Promise<CfnLintResult> {
  const bin = await ensureCfnLint(opts.log);
  const ignore = opts.ignore ?? IGNORED_CHECKS;
  const out = await capture(bin, ['--format', 'json', ...(ignore.length ? ['--ignore-checks', ...ignore] : []), '--', ...templates], {
    name: 'cfn-lint',
  });
  const { stdout, stderr } = out;
  const code = out.code ?? -1;
  // Codes outside the mask (1: cfn-lint crashed, 32: bad arguments or template not found) are its own failures.
  if ((code & ~(2 | 4 | 8)) !== 0) throw new Error(`cfn-lint exited with ${code}:\n${stderr.slice(-4000)}${stdout.slice(-4000)}`);
  return { code, findings: stdout.trim() ? (JSON.parse(stdout) as CfnLintFinding[]) : [] };
}

export function formatFinding(f: CfnLintFinding): string {
  return `${f.Level} ${f.Rule.Id} ${f.Filename}:${f.Location.Start.LineNumber} ${(f.Location.Path ?? []).join('/')}: ${f.Message}`;
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const templates = process.argv.slice(2);
  if (!templates.length) {
    process.stderr.write('usage: node local/cfn-lint.ts <template.json>...\n');
    process.exit(2);
  }
  void cfnLint(templates, { log: (m) => process.stderr.write(`${m}\n`) }).then((result) => {
    for (const f of result.findings) process.stdout.write(`${formatFinding(f)}\n`);
    process.exit(result.code);
  });
}
