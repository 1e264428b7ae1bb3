/**
 * A model family's chat template (the Jinja text in `tokenizer_config.json`'s `chat_template`),
 * rendered by @huggingface/jinja with the variables transformers' `apply_chat_template` passes:
 * `messages`, `add_generation_prompt`, the special tokens, `tools`, and any extra keyword such as
 * Qwen3's `enable_thinking`.
 */
import { Template } from '@huggingface/jinja';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface ChatTemplateOptions {
  /** End with the header of an assistant turn, so generation continues as the assistant. Default true. */
  addGenerationPrompt?: boolean;
  /** Qwen3's switch: false renders an empty `<think>` block so the model answers directly. */
  enableThinking?: boolean;
  /** Tool schemas (OpenAI function format) for templates that list them. */
  tools?: unknown[];
  /** Further template variables, passed as they are. */
  extra?: Record<string, unknown>;
}

export class ChatTemplateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ChatTemplateError';
  }
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

export class ChatTemplate {
  private readonly template: Template;

  constructor(
    readonly source: string,
    /** bos_token, eos_token, … as the template expects them. */
    private readonly specials: Record<string, string>,
  ) {
    try {
      this.template = new Template(source);
    } catch (err) {
      throw new ChatTemplateError(`chat template does not parse: ${(err as Error).message}`, { cause: err });
    }
  }

  render(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string {
    messages.forEach((m, i) => {
      if (!m || !ROLES.has(m.role) || typeof m.content !== 'string')
        throw new ChatTemplateError(
          `messages[${i}] must be { role: system|user|assistant|tool, content: string }, got ${JSON.stringify(m)}`,
        );
    });
    const vars: Record<string, unknown> = {
      ...this.specials,
      ...opts.extra,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: opts.addGenerationPrompt ?? true,
    };
    // Left undefined unless asked: Qwen3 tests `enable_thinking is defined and … is false`.
    if (opts.enableThinking !== undefined) vars.enable_thinking = opts.enableThinking;
    if (opts.tools !== undefined) vars.tools = opts.tools;
    try {
      return this.template.render(vars);
    } catch (err) {
      throw new ChatTemplateError(`chat template failed to render: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
}
