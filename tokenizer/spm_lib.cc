// spm_lib.cc — the few extern "C" functions tram needs from libsentencepiece
// (tokenizer.model files): load, vocabulary, encode.  Nothing C++ leaks out.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "tokenizer/spm_lib.h"
#include "tokenizer/token_attr.h"
#include "tokenizer/tokenizer.h"

struct tram_spm_lib {
    sentencepiece::SentencePieceProcessor sp;
    std::vector<std::string> pieces;
};

extern "C" int tram_spm_lib_load(tram_spm_lib **out, const char *path, char *msg, size_t msg_len)
{
    tram_spm_lib *s = new (std::nothrow) tram_spm_lib;
    *out = nullptr;
    if (!s) {
        snprintf(msg, msg_len, "%s: out of memory", path);
        return -1;
    }
    const auto status = s->sp.Load(path);
    if (!status.ok()) {
        snprintf(msg, msg_len, "%s: %s", path, status.ToString().c_str());
        delete s;
        return -1;
    }
    for (int i = 0; i < s->sp.GetPieceSize(); i++)
        s->pieces.push_back(s->sp.IdToPiece(i));
    *out = s;
    return 0;
}

extern "C" void tram_spm_lib_free(tram_spm_lib *s)
{
    delete s;
}

extern "C" int tram_spm_lib_size(const tram_spm_lib *s)
{
    return (int)s->pieces.size();
}

extern "C" const char *tram_spm_lib_piece(const tram_spm_lib *s, int id, float *score, int *attr)
{
    *score = s->sp.GetScore(id);
    *attr = s->sp.IsControl(id) ? TRAM_ATTR_CONTROL
          : s->sp.IsUnknown(id) ? TRAM_ATTR_UNKNOWN
          : s->sp.IsUnused(id)  ? TRAM_ATTR_UNUSED
          : s->sp.IsByte(id)    ? TRAM_ATTR_BYTE
                                : TRAM_ATTR_NORMAL;
    return s->pieces[(size_t)id].c_str();
}

extern "C" int tram_spm_lib_special_id(const tram_spm_lib *s, int which)
{
    return which == 0 ? s->sp.unk_id() : which == 1 ? s->sp.bos_id() : s->sp.eos_id();
}

extern "C" int tram_spm_lib_encode(const tram_spm_lib *s, const char *text, size_t len, int32_t **ids)
{
    std::vector<int> v;
    *ids = nullptr;
    if (!s->sp.Encode(std::string(text, len), &v).ok())
        return -1;
    *ids = static_cast<int32_t *>(malloc((v.size() + 1) * sizeof(int32_t)));
    if (!*ids)
        return -1;
    for (size_t i = 0; i < v.size(); i++)
        (*ids)[i] = v[i];
    return (int)v.size();
}

extern "C" int tram_spm_lib_add_dummy_prefix(const tram_spm_lib *s)
{
    // The normalizer spec is not in the public headers: a model that adds
    // the dummy prefix turns "a" into pieces starting with U+2581.
    std::vector<std::string> p;
    return s->sp.Encode("a", &p).ok() && !p.empty() && p[0].rfind("\xe2\x96\x81", 0) == 0;
}

extern "C" int tram_spm_train(const char *text_file, const char *model_prefix, int vocab_size, tram_error *err)
{
    const std::string args = std::string("--input=") + text_file + " --model_prefix=" + model_prefix +
                             " --vocab_size=" + std::to_string(vocab_size) +
                             " --model_type=bpe --byte_fallback=true --normalization_rule_name=identity"
                             " --remove_extra_whitespaces=false --character_coverage=0.98 --minloglevel=2";
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    return status.ok() ? 0 : tram_fail(err, "sentencepiece trainer: %s", status.ToString().c_str());
}
