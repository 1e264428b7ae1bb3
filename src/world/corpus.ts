/**
 * The world's passage corpus in Search-R1 JSONL (`{"id","contents"}`, title on the first line).
 * Like wiki-18's 100-word chunks, an entity's article is cut into passages that share its title:
 * here one passage per fact, so that three retrieved passages fit a tiny model's context. Persons
 * share surnames and titles share words, so the top passages often include look-alikes.
 */
import { deriveSeed, Rng } from '../util/rng.js';
import type { WorldConfig } from './config.js';
import type { WorldIndex } from './entities.js';
import { RELATION_SPECS, type Relation } from './relations.js';

export interface WorldPassage {
  id: string;
  contents: string;
  /** The fact the passage states and the entity whose article it belongs to (not in the JSONL). */
  fact: string;
  entity: string;
}

export function buildCorpus(
  index: WorldIndex,
  config: Pick<WorldConfig, 'seed' | 'decoys'> = { seed: 0 },
): WorldPassage[] {
  const passages: WorldPassage[] = [];
  for (const f of index.graph.facts) {
    const subject = index.entity.get(f.subject)!;
    let text = index.sentence(f);
    // Places with a second name mention it in their article: the alias is a gold answer too.
    if (subject.aliases.length > 0)
      text += ` ${subject.name} is also called ${subject.aliases.join(' or ')}.`;
    passages.push({
      id: String(passages.length),
      contents: `${subject.name}\n${text}`,
      fact: f.id,
      entity: subject.id,
    });
  }
  passages.push(...decoyPassages(index, config, passages.length));
  return passages;
}

/** The fact id a decoy passage carries: it states no fact of the world. */
export const DECOY_PREFIX = 'decoy:';

/** Who a decoy passage is about, one per decoy of a fact (config.decoys <= their number). */
export const DECOY_RELATIVES = ['the rival of', 'a partner of'] as const;

/**
 * The hard preset's look-alikes: `decoys` passages per fact in the subject's article, each stating
 * the fact's relation of a relative of the subject ("the rival of X", "a partner of X") with a
 * wrong object. A decoy shares every word of the fact's search query and holds "X was born in Y"
 * verbatim, so it ranks beside the true passage and a reader that copies the object after the
 * relation words fails. Appended after the fact passages (their ids are unchanged).
 */
function decoyPassages(
  index: WorldIndex,
  config: Pick<WorldConfig, 'seed' | 'decoys'>,
  firstId: number,
): WorldPassage[] {
  const n = config.decoys ?? 0;
  if (n === 0) return [];
  const rng = new Rng(deriveSeed(config.seed, 'decoys'));
  const pools = new Map<string, string[]>();
  const poolOf = (type: string) => {
    if (!pools.has(type))
      pools.set(
        type,
        index.graph.entities.filter((e) => e.type === type).map((e) => e.id),
      );
    return pools.get(type)!;
  };
  const out: WorldPassage[] = [];
  for (const f of index.graph.facts) {
    const others = poolOf(RELATION_SPECS[f.relation].object).filter((id) => id !== f.object);
    const subject = index.entity.get(f.subject)!;
    for (const relative of DECOY_RELATIVES.slice(0, n)) {
      const text = decoySentence(f.relation, `${relative} ${subject.name}`, index.name(rng.pick(others)));
      out.push({
        id: String(firstId + out.length),
        contents: `${subject.name}\n${text}`,
        fact: `${DECOY_PREFIX}${f.id}`,
        entity: subject.id,
      });
    }
  }
  return out;
}

/** The relation's sentence with a relative of the subject as its subject, capitalised. */
export function decoySentence(relation: Relation, subject: string, object: string): string {
  const s = RELATION_SPECS[relation].sentence(subject, object);
  return s[0].toUpperCase() + s.slice(1);
}

/** The JSONL text of a corpus: one `{"id","contents"}` per line, in id order. */
export function corpusJsonl(passages: readonly WorldPassage[]): string {
  return passages.map((p) => `${JSON.stringify({ id: p.id, contents: p.contents })}\n`).join('');
}

/**
 * Passages the pretraining mix may show inside observations: those of head and demonstration
 * entities. A tail entity's passage would hand the policy its facts (even as a distractor).
 */
export function pretrainingView(index: WorldIndex, passages: readonly WorldPassage[]): WorldPassage[] {
  return passages.filter((p) => index.entity.get(p.entity)!.role !== 'tail');
}
