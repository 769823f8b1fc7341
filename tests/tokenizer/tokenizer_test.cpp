#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "golden/splitmix.h"
#include "models/tokenizer/bpe.h"
#include "models/tokenizer/byte_unicode.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/token_stream.h"
#include "models/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace bdsl::models {
namespace {

using Ids = std::vector<int32_t>;

TEST(ByteLevelAlphabet, MapsBytesAsGpt2Does) {
  EXPECT_EQ(byte_to_unicode(' '), U'Ġ');
  EXPECT_EQ(byte_to_unicode('\n'), U'Ċ');
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0xAD), char32_t(0x143));  // soft hyphen is not printable: shifted
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<unsigned char>(b))), b);
  EXPECT_EQ(bytes_to_byte_level(" hi\n"), "ĠhiĊ");
  EXPECT_EQ(byte_level_to_bytes("ĠhiĊ"), " hi\n");
}

TEST(BpeMerges, LowestRankFirstThenLeftmost) {
  BpeMerges merges;
  // ids: a=0 b=1 c=2 ab=3 bc=4 abc=5 aa=6
  merges.add(1, 2, 4, 0);  // b c -> bc   (rank 0: wins over "a b")
  merges.add(0, 1, 3, 1);  // a b -> ab
  merges.add(0, 4, 5, 2);  // a bc -> abc
  merges.add(0, 0, 6, 3);  // a a -> aa
  Ids ids{0, 1, 2};
  merges.apply(ids);
  EXPECT_EQ(ids, (Ids{5}));
  ids = {0, 0, 0};
  merges.apply(ids);
  EXPECT_EQ(ids, (Ids{6, 0}));  // leftmost pair of equal rank merges first
  ids = {0, 1, 0, 1};
  merges.apply(ids);
  EXPECT_EQ(ids, (Ids{3, 3}));
}

TEST(Tokenizer, AppliesHandMadeMerges) {
  const Tokenizer tok(test::hand_made_spec({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}}));
  const auto ids = tok.encode("hello world", false);
  ASSERT_EQ(ids.size(), 6u);  // hello | " w" | o | r | l | d
  EXPECT_EQ(tok.token_text(ids[0]), "hello");
  EXPECT_EQ(tok.decode(ids), "hello world");
  const auto w = tok.encode(" world", false);
  EXPECT_EQ(tok.token_text(w[0]), "Ġw");
}

TEST(Tokenizer, WholeWordInVocabularyIsTakenEvenWithoutMerges) {
  auto spec = test::hand_made_spec({});
  spec.tokens.push_back(bytes_to_byte_level("xyz"));  // reachable by no merge
  spec.token_types.push_back(1);
  const Tokenizer tok(spec);
  EXPECT_EQ(tok.encode("xyz", false), (Ids{static_cast<int32_t>(spec.tokens.size() - 1)}));
}

TEST(Tokenizer, SpecialTokensAreMatchedWholeAndLongestFirst) {
  const Tokenizer tok(test::hand_made_spec({}));
  const auto eot = *tok.find_token("<|eot_id|>");
  const auto eot_long = *tok.find_token("<|eot_id_long|>");
  EXPECT_EQ(tok.eot_id(), eot);
  const auto ids = tok.encode("a<|eot_id|>b<|eot_id_long|>", false);
  EXPECT_EQ(ids, (Ids{'a', eot, 'b', eot_long}));
  EXPECT_TRUE(tok.is_end_of_generation(eot));
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos_id()));
  // Without parse_special the text is ordinary bytes.
  EXPECT_EQ(tok.encode("<|eot_id|>", false, false).size(), 10u);
}

TEST(Tokenizer, BosIsAddedOnceAndRendersOrHides) {
  const Tokenizer tok(test::hand_made_spec({}));
  EXPECT_EQ(tok.encode("a", true), (Ids{tok.bos_id(), 'a'}));
  EXPECT_EQ(tok.encode("<|begin_of_text|>a", true), (Ids{tok.bos_id(), 'a'}));
  const Ids ids{tok.bos_id(), 'a', tok.eot_id()};
  EXPECT_EQ(tok.decode(ids), "<|begin_of_text|>a<|eot_id|>");
  EXPECT_EQ(tok.decode(ids, false), "a");
  EXPECT_THROW(tok.decode(Ids{tok.vocab_size()}), std::out_of_range);
}

TEST(Tokenizer, RandomBytesRoundTrip) {
  const Tokenizer tok(test::hand_made_spec({{"a", "b"}, {" ", "a"}, {"\xc3", "\xa9"}, {"1", "2"}}));
  golden::SplitMix64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(rng.next() % 64, '\0');
    // Mix raw bytes with ASCII so both the byte fallback and the merges are exercised.
    for (char& c : text) c = static_cast<char>(rng.next() % 3 ? "ab 12\n\xc3\xa9'"[rng.next() % 10] : rng.next());
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << "trial " << trial;
  }
}

TEST(Tokenizer, RejectsUnsupportedSpecsClearly) {
  auto spec = test::hand_made_spec({});
  spec.pre = "qwen2";
  EXPECT_THROW(
      {
        try {
          Tokenizer t(spec);
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre is 'qwen2'"), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
  spec = test::hand_made_spec({});
  spec.merges.push_back("q Z");  // "qZ" is not a token
  EXPECT_THROW(Tokenizer t(spec), std::runtime_error);
  spec = test::hand_made_spec({});
  spec.model = "bert";
  EXPECT_THROW(Tokenizer t(spec), std::runtime_error);
  spec = test::hand_made_spec({});
  spec.tokens.erase(spec.tokens.begin());  // byte 0 missing
  spec.token_types.erase(spec.token_types.begin());
  EXPECT_THROW(Tokenizer t(spec), std::runtime_error);
}

TEST(Tokenizer, LongTextIsFast) {
  const Tokenizer tok(test::hand_made_spec({{"t", "h"}, {"th", "e"}, {" ", "the"}, {" ", "c"}, {"a", "t"}}));
  std::string text;
  golden::SplitMix64 rng(7);
  const char* words[] = {" the", " cat", " sat", " on", " a", " mat", ",", " 12345", "\n", " émigré"};
  while (text.size() < 400000) text += words[rng.next() % 10];
  text += std::string(20000, 'a');  // one very long word: the heap keeps BPE O(n log n)
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 100000u);
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(TokenStreamDecoder, HoldsBackHalfCharacters) {
  const Tokenizer tok(test::hand_made_spec({}));
  TokenStreamDecoder stream(tok);
  EXPECT_EQ(stream.push(0xE2), "");  // first byte of "€" (E2 82 AC)
  EXPECT_EQ(stream.push(0x82), "");
  EXPECT_EQ(stream.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(stream.push('x'), "x");
  EXPECT_EQ(stream.push(0xFF), "\xFF");  // can never become valid: passed through
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.flush(), "\xF0");
  EXPECT_EQ(stream.push(tok.eot_id()), "");  // control tokens hidden by default
}

TEST(ChatTemplate, MatchesTheHuggingFaceTemplate) {
  const std::vector<ChatMessage> messages{{"system", "  Be brief. "}, {"user", "Hi\n"}};
  EXPECT_EQ(apply_chat_template(messages, true),
            "<|begin_of_text|>System: Be brief.<|eot_id|>User: Hi<|eot_id|>Assistant: ");
  EXPECT_EQ(apply_chat_template({{"USER", "x"}}, false, ""), "User: x<|eot_id|>");
}

// The reference strings of docs/model-family.md section 5: each template's rendering of a system
// prompt, a user turn and an assistant turn.
const std::vector<ChatMessage> kConversation{{"system", "You are a helpful assistant."}, {"user", "Hello"}, {"assistant", "Hi there"}};

TEST(ChatTemplate, Llama3MatchesItsReferenceStrings) {
  const std::string bos = "<|begin_of_text|>", eos = "<|end_of_text|>";
  EXPECT_EQ(apply_chat_template(ChatFormat::Llama3, kConversation, false, bos, eos),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "Hi there<|eot_id|>");
  EXPECT_EQ(apply_chat_template(ChatFormat::Llama3, {kConversation[0], kConversation[1]}, true, bos, eos),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Content is trimmed, as the template's `| trim` does.
  EXPECT_EQ(apply_chat_template(ChatFormat::Llama3, {{"user", "  Hi\n"}}, false, "", eos),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, Falcon3MatchesItsReferenceStrings) {
  const std::string bos = "<|begin_of_text|>", eos = "<|endoftext|>";
  EXPECT_EQ(apply_chat_template(ChatFormat::Falcon3, kConversation, false, bos, eos),
            "<|system|>\nYou are a helpful assistant.\n<|user|>\nHello\n<|assistant|>\nHi there<|endoftext|>");
  EXPECT_EQ(apply_chat_template(ChatFormat::Falcon3, {kConversation[0], kConversation[1]}, true, bos, eos),
            "<|system|>\nYou are a helpful assistant.\n<|user|>\nHello\n<|assistant|>\n");
  // An assistant turn that is not the last ends with EOS and a newline; content is not trimmed.
  EXPECT_EQ(apply_chat_template(ChatFormat::Falcon3, {kConversation[2], {"user", " Again "}}, true, bos, eos),
            "<|assistant|>\nHi there<|endoftext|>\n<|user|>\n Again \n<|assistant|>\n");
}

TEST(ChatTemplate, TheFormatComesFromTheFilesTemplateElseItsArchitecture) {
  // Meta-Llama-3-8B-Instruct's template (docs/model-family.md section 5).
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
      "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  // Falcon3 Instruct's plain branch (the same section).
  const std::string falcon3 =
      "{%- for message in messages %}{%- if message['role'] == 'system' %}{{- '<|system|>\n' + message['content'] + "
      "'\n' }}{%- elif message['role'] == 'user' %}{{- '<|user|>\n' + message['content'] + '\n' }}{%- elif "
      "message['role'] == 'assistant' %}{{- '<|assistant|>\n' + message['content'] + eos_token }}{%- endif %}{%- endfor %}";
  EXPECT_EQ(chat_format_for(llama3, "llama"), ChatFormat::Llama3);
  EXPECT_EQ(chat_format_for(falcon3, "llama"), ChatFormat::Falcon3);  // Falcon3's files say `llama` too
  EXPECT_EQ(chat_format_for("{{ 'Human: ' }}{{ 'BITNETAssistant: ' }}", "bitnet-b1.58"), ChatFormat::BitNet);
  EXPECT_EQ(chat_format_for("", "llama"), ChatFormat::Llama3);
  EXPECT_EQ(chat_format_for("", "bitnet-b1.58"), ChatFormat::BitNet);
  EXPECT_EQ(chat_format_for("", "bitnet-25"), ChatFormat::BitNet);
  EXPECT_EQ(chat_format_for("{{ unknown }}", "bitnet"), ChatFormat::BitNet);
  // Phi-3's markers include Falcon3's: llama.cpp tells them apart by "<|end|>".
  EXPECT_EQ(chat_format_for("{{ '<|user|>' + m + '<|end|>' + '<|assistant|>' }}", "llama"), ChatFormat::Llama3);
  // No messages, no generation prompt (it is written inside the template's loop).
  EXPECT_EQ(apply_chat_template(ChatFormat::Falcon3, {}, true, "", "<|endoftext|>"), "");
  EXPECT_STREQ(to_string(ChatFormat::Falcon3), "falcon3");
}

// The tokenizer writes the prompt in its format with its own BOS and EOS text.
TEST(ChatTemplate, TheTokenizerPromptsInItsFormat) {
  auto spec = test::hand_made_spec({});
  const Tokenizer bitnet(spec);
  EXPECT_EQ(bitnet.chat_format(), ChatFormat::BitNet);
  EXPECT_EQ(bitnet.chat_prompt({{"user", "Hi"}}, true), "<|begin_of_text|>User: Hi<|eot_id|>Assistant: ");
  spec.chat_format = ChatFormat::Llama3;
  const Tokenizer llama3(spec);
  EXPECT_EQ(llama3.chat_prompt({{"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

}  // namespace
}  // namespace bdsl::models
