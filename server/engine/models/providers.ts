import type { Provider } from '../../../shared/schemas/models.js'
import type { ModelProvider } from '../../domain/models/index.js'
import { baseUrlSetByOperator } from '../../config.js'
import { anthropicProvider } from './wire/anthropic.js'
import { openAiProvider } from './wire/openai.js'
import type { ProviderOptions } from './wire/shared.js'

// Model providers behind one interface (DESIGN 6; its types are the domain's: domain/models/provider.ts):
// provider_a speaks the Anthropic Messages API,
// provider_b the OpenAI Chat Completions API, through their official SDKs. Base URLs are configurable so
// a local compatible server, or the tests' fake provider, can stand in.
//
// Prompts are built so the providers' caches work (DESIGN 13; issue 29): a request is the tools, the
// system prompt and the conversation, in that order, with nothing in them that changes from one call to
// the next (tool calls' arguments are sent with their keys in one order, whether the conversation was
// kept in memory or read back from the database). provider_b caches such a prefix by itself;
// provider_a is told where with cache breakpoints. Both report the tokens read from and written to the
// cache, which are priced apart (call.ts).

export function createProviders(options: ProviderOptions): Record<Provider, ModelProvider> {
  const set = (provider: Provider) => ({
    baseUrlSetByOperator: baseUrlSetByOperator(options.baseUrls, provider),
  })
  return {
    provider_a: Object.assign(anthropicProvider(options), set('provider_a')),
    provider_b: Object.assign(openAiProvider(options), set('provider_b')),
  }
}

export { ToolNames, type ProviderOptions } from './wire/shared.js'
