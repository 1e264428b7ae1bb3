/**
 * The world's passage corpus in Search-R1 JSONL (`{"id","contents"}`, title on the first line).
 * Like wiki-18's 100-word chunks, an entity's article is cut into passages that share its title:
 * here one passage per fact, so that three retrieved passages fit a tiny model's context. Persons
 * share surnames and titles share words, so the top passages often include look-alikes.
 */
import type { WorldIndex } from './entities.js';

export interface WorldPassage {
  id: string;
  contents: string;
  /** The fact the passage states and the entity whose article it belongs to (not in the JSONL). */
  fact: string;
  entity: string;
}

export function buildCorpus(index: WorldIndex): WorldPassage[] {
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
  return passages;
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
