/**
 * Trace settings: off unless an endpoint is set; which endpoint wins and where spans are posted;
 * the standard OTEL_* variables read and refused, naming the variable, as every setting is.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { SettingError } from '../../src/errors.js'
import { loadSettings } from '../../src/settings.js'
import { traceSettings } from '../../src/settings-trace.js'

function refused(env: Record<string, string>, variable: string, message: RegExp): void {
  assert.throws(
    () => traceSettings(env),
    (err: unknown) => err instanceof SettingError && err.variable === variable && message.test(err.message),
  )
}

describe('trace settings', () => {
  test('off by default, with the SDK defaults otherwise', () => {
    assert.deepEqual(traceSettings({}), {
      otlpTracesUrl: undefined,
      serviceName: 'fairvisor',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    })
    // Read as every setting is, so a gateway's own settings carry them.
    assert.equal(loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000' }).otlpTracesUrl, undefined)
  })

  test('a base endpoint gets /v1/traces, as OTEL_EXPORTER_OTLP_ENDPOINT does; a full one is kept', () => {
    const url = (v: string) => traceSettings({ FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: v }).otlpTracesUrl
    assert.equal(url('http://collector:4318'), 'http://collector:4318/v1/traces')
    assert.equal(url('http://collector:4318/'), 'http://collector:4318/v1/traces')
    assert.equal(url('https://gw.example/otlp'), 'https://gw.example/otlp/v1/traces')
    assert.equal(url('http://collector:4318/v1/traces'), 'http://collector:4318/v1/traces')
    assert.equal(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).otlpTracesUrl, 'http://c:4318/v1/traces')
    // The signal's own variable is a full URL, used as it is.
    assert.equal(traceSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/x' }).otlpTracesUrl, 'http://c:4318/x')
  })

  test('ours wins, then the traces endpoint, then the base one', () => {
    const all = {
      FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ours:1',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:2/t',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:3',
    }
    assert.equal(traceSettings(all).otlpTracesUrl, 'http://ours:1/v1/traces')
    const { FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: _, ...standard } = all
    assert.equal(traceSettings(standard).otlpTracesUrl, 'http://traces:2/t')
    assert.equal(traceSettings({ ...standard, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' }).otlpTracesUrl, 'http://base:3/v1/traces')
  })

  test('an endpoint that is no http(s) URL is refused, naming its variable', () => {
    refused({ FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT', /http or https/)
    refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'OTEL_EXPORTER_OTLP_ENDPOINT', /is not a URL/)
    refused({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://c:4317' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', /OTLP\/HTTP/)
  })

  test('OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and its argument', () => {
    const s = traceSettings({ OTEL_SERVICE_NAME: 'edge', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })
    assert.deepEqual([s.serviceName, s.sampler, s.samplerRatio], ['edge', 'parentbased_traceidratio', 0.25])
    // The argument is the ratio samplers' only: the SDK ignores it for the others, so do we.
    assert.equal(traceSettings({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: 'x' }).samplerRatio, 1)
    refused({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, 'OTEL_TRACES_SAMPLER', /parentbased_traceidratio/)
    refused({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG', /from 0 to 1/)
    refused({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, 'OTEL_TRACES_SAMPLER_ARG', /from 0 to 1/)
  })
})
