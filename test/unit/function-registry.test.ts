// functionsOf: a controller's functions, read from its declaration (docs/contributing/layout.md#adding-a-controller).
import { describe, expect, test } from '@jest/globals';
import { controllers } from '../../functions/controllers.ts';
import { functions, functionsOf } from '../../functions/index.ts';

describe('functionsOf', () => {
  test("names each controller's declared functions, every one of them in the registry", () => {
    for (const c of controllers) {
      expect(functionsOf(c.name)).toEqual(c.functions.map((f) => f.name));
      for (const name of functionsOf(c.name)) expect(functions.map((f) => f.name)).toContain(name);
    }
    expect(functionsOf('storage')).toEqual(expect.arrayContaining(['storage', 'storage-poll', 'migrator']));
  });

  test('a name no controller has is an error naming the controllers', () => {
    expect(() => functionsOf('stroage')).toThrow(/no controller is named stroage \(controllers: history, storage, map, composite\)/);
  });
});
