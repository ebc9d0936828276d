import type { Testbed } from '../../local/testbed.ts';
import { stopBuildsAhead } from './builds-ahead.ts';

export default async function globalTeardown(): Promise<void> {
  stopBuildsAhead();
  await (globalThis as { __outriggerTestbed?: Testbed }).__outriggerTestbed?.stop();
}
