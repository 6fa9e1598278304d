/* api.c: the table of server APIs (api.h), one row each, in the order of
 * scenario.h's scn_endpoint. */
#include "api.h"

extern const lg_api lg_api_chat, lg_api_completions, lg_api_responses, lg_api_generate;

static const lg_api *const k_api[SCN_ENDPOINT__COUNT] = {
    [SCN_ENDPOINT_CHAT] = &lg_api_chat,
    [SCN_ENDPOINT_COMPLETIONS] = &lg_api_completions,
    [SCN_ENDPOINT_RESPONSES] = &lg_api_responses,
    [SCN_ENDPOINT_GENERATE] = &lg_api_generate,
};

const lg_api *lg_api_of(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT && k_api[e] ? k_api[e] : &lg_api_chat;
}
