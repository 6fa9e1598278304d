/* api.c: the table of server APIs (api.h), made from scenario.h's
 * SCN_ENDPOINTS rows: row NAME is loadgen/api_NAME.c's lg_api_NAME. */
#include "api.h"

#define API_EXTERN(id, name, path) extern const lg_api lg_api_##name;
SCN_ENDPOINTS(API_EXTERN)
#undef API_EXTERN

#define API_ROW(id, name, path) [SCN_ENDPOINT_##id] = &lg_api_##name,
static const lg_api *const k_api[SCN_ENDPOINT__COUNT] = {SCN_ENDPOINTS(API_ROW)};
#undef API_ROW

const lg_api *lg_api_of(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT && k_api[e] ? k_api[e] : &lg_api_chat;
}
