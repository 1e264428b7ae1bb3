/**
 * Algorithm parts registered by name (verl's pattern): the config holds only names. Registering a
 * name again with a different value throws; a failed lookup lists the registered names.
 */
import { DuplicateRegistrationError, UnknownRegistryNameError } from './errors.js';

export class NamedRegistry<T> {
  private readonly entries = new Map<string, T>();

  /** `kind` names the registry in its errors ('advantage', 'loss'). */
  constructor(readonly kind: string) {}

  register(name: string, value: T): void {
    const prev = this.entries.get(name);
    if (prev && prev !== value) throw new DuplicateRegistrationError(this.kind, name);
    this.entries.set(name, value);
  }

  get(name: string): T {
    const value = this.entries.get(name);
    if (!value) throw new UnknownRegistryNameError(this.kind, name, this.names());
    return value;
  }

  /** The registered names, sorted. */
  names(): string[] {
    return [...this.entries.keys()].sort();
  }
}
