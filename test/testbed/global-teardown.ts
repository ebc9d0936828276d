import type { Testbed } from '../../local/testbed.ts';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __outriggerTestbed?: Testbed }).__outriggerTestbed?.stop();
}
