import type { Provider } from '../../../shared/schemas/models.js'
import { ProviderError, type ModelProvider } from '../../domain/models/index.js'
import { addressSetting } from './failures.js'
import { baseUrlSetByOperator } from '../../config.js'
import { anthropicProvider, anthropicSdk } from './wire/anthropic.js'
import { openAiProvider, openAiSdk } from './wire/openai.js'
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
    provider_a: Object.assign(
      saysOutages(anthropicProvider(options), 'provider_a', options),
      set('provider_a'),
    ),
    provider_b: Object.assign(
      saysOutages(openAiProvider(options), 'provider_b', options),
      set('provider_b'),
    ),
  }
}

/**
 * Loads both SDKs now rather than at the first call (each loads there by itself otherwise): osd serve
 * calls it once its engine runs, so that the first model call does not wait for the import, while
 * processes and tests that never call a model load neither.
 */
export async function loadModelSdks(): Promise<void> {
  await Promise.all([anthropicSdk(), openAiSdk()])
}

/**
 * One warn line when a provider stops answering (no connection, a timeout, a 5xx), naming it, its
 * address and the setting that moves it, and one info line when it answers again (issue 51): not a
 * line per call, which an outage under load would make thousands of. In this process's memory.
 */
function saysOutages(
  provider: ModelProvider,
  name: Provider,
  { baseUrls, log }: ProviderOptions,
): ModelProvider {
  if (!log) return provider
  let down = false
  const where = { provider: name, address: baseUrls[name], setting: addressSetting(name) }
  return {
    ...provider,
    async call(request, credentials, signal, onText, headers) {
      try {
        const reply = await provider.call(request, credentials, signal, onText, headers)
        if (down) log.info(where, 'the model provider answers again')
        down = false
        return reply
      } catch (err) {
        if (err instanceof ProviderError && err.kind === 'outage' && !down) {
          down = true
          log.warn({ ...where, reason: err.message }, 'the model provider does not answer')
        }
        throw err
      }
    },
    listModels: (credentials, signal) => provider.listModels(credentials, signal),
  }
}

export { ToolNames, type ProviderOptions } from './wire/shared.js'
