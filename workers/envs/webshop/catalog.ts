/**
 * The generated WebShop-style catalog (Yao et al. 2022, "WebShop: Towards Scalable Real-World
 * Web Interaction with Grounded Language Agents"): 36 product types in 6 categories, 32
 * products each (1,152 in all), generated from a fixed seed so every machine has the same shop.
 *
 * A product has a type (the WebShop "product category" leaf), 2–3 attributes from its type's
 * pool (e.g. `long lasting`), 1–2 option dimensions with 2–4 values each (e.g. `color: blue,
 * red`), a short title (`brand attribute type`) and an integer price in dollars. One type per
 * category is held out for `test_unseen` (see {@link UNSEEN_TYPES}).
 */
import { hash32, Rng } from "../_rng.ts";

/** Option dimensions and their values; every value is unique across dimensions. */
export const OPTION_VALUES: Readonly<Record<string, readonly string[]>> = {
  color: ["black", "white", "blue", "red", "green", "pink", "grey", "brown", "navy", "beige"],
  size: ["small", "medium", "large", "x-large"],
  volume: ["8 ounce", "16 ounce", "32 ounce"],
  count: ["pack of 2", "pack of 6", "pack of 12"],
  flavor: ["vanilla", "chocolate", "mint", "lemon", "berry", "caramel"],
  scent: ["lavender", "rose", "citrus", "unscented", "coconut"],
  "shoe size": ["size 7", "size 8", "size 9", "size 10", "size 11"],
};

interface CategorySpec {
  attributes: string[];
  /** type → [option dimensions, base price in dollars]. */
  types: Record<string, [string[], number]>;
}

/** Categories with their attribute pools and product types. */
export const CATEGORIES: Readonly<Record<string, CategorySpec>> = {
  beauty: {
    attributes: [
      "long lasting",
      "sulfate free",
      "paraben free",
      "natural ingredients",
      "cruelty free",
      "fragrance free",
      "dry skin",
      "travel size",
      "vegan",
    ],
    types: {
      shampoo: [["volume", "scent"], 14],
      conditioner: [["volume", "scent"], 14],
      "body lotion": [["volume", "scent"], 12],
      lipstick: [["color"], 16],
      "face serum": [["volume"], 24],
      perfume: [["scent", "volume"], 45],
    },
  },
  grocery: {
    attributes: [
      "gluten free",
      "sugar free",
      "organic",
      "low calorie",
      "high protein",
      "non gmo",
      "caffeine free",
      "keto friendly",
      "individually wrapped",
    ],
    types: {
      "coffee beans": [["flavor", "count"], 15],
      "green tea": [["flavor", "count"], 9],
      "protein bar": [["flavor", "count"], 20],
      "dark chocolate": [["flavor", "count"], 10],
      granola: [["flavor", "count"], 8],
      popcorn: [["flavor", "count"], 7],
    },
  },
  fashion: {
    attributes: [
      "machine wash",
      "cotton",
      "slim fit",
      "loose fit",
      "quick dry",
      "long sleeve",
      "stretch",
      "breathable",
      "waterproof",
    ],
    types: {
      "t-shirt": [["color", "size"], 15],
      jeans: [["color", "size"], 35],
      hoodie: [["color", "size"], 30],
      dress: [["color", "size"], 40],
      "running shoes": [["color", "shoe size"], 55],
      socks: [["color", "count"], 10],
    },
  },
  electronics: {
    attributes: [
      "wireless",
      "noise cancelling",
      "fast charging",
      "long battery life",
      "water resistant",
      "usb c",
      "bluetooth",
      "portable",
      "ergonomic",
    ],
    types: {
      headphones: [["color"], 50],
      "phone charger": [["color", "count"], 15],
      speaker: [["color"], 40],
      "wireless mouse": [["color"], 20],
      keyboard: [["color"], 35],
      "phone case": [["color"], 12],
    },
  },
  home: {
    attributes: [
      "machine wash",
      "soft",
      "eco friendly",
      "easy clean",
      "lightweight",
      "soy wax",
      "handmade",
      "non slip",
      "hypoallergenic",
    ],
    types: {
      "throw pillow": [["color"], 18],
      blanket: [["color", "size"], 30],
      "bath towel": [["color", "count"], 20],
      candle: [["scent", "count"], 15],
      "desk lamp": [["color"], 28],
      "storage basket": [["color", "size"], 22],
    },
  },
  pet: {
    attributes: [
      "grain free",
      "natural ingredients",
      "durable",
      "washable",
      "small breed",
      "large breed",
      "odor control",
      "non toxic",
      "chew resistant",
    ],
    types: {
      "dog treats": [["flavor", "count"], 12],
      "cat litter": [["scent", "volume"], 18],
      "cat toy": [["color", "count"], 8],
      "dog bed": [["color", "size"], 40],
      "dog leash": [["color", "size"], 15],
      "pet shampoo": [["scent", "volume"], 13],
    },
  },
};

/** Held-out types: tasks of `test_unseen` ask only for these; train never does. */
export const UNSEEN_TYPES: ReadonlySet<string> = new Set([
  "perfume",
  "granola",
  "hoodie",
  "keyboard",
  "candle",
  "dog bed",
]);

/** Made-up brand names (one word each). */
export const BRANDS: readonly string[] = [
  "lumora",
  "zentra",
  "brisko",
  "nordix",
  "velora",
  "kappa",
  "solace",
  "ferno",
  "tidal",
  "orbis",
  "pinecrest",
  "amberly",
  "quilo",
  "marlo",
  "vexa",
  "rovan",
];

/** Products per type. */
export const PRODUCTS_PER_TYPE = 32;

/** One catalog product. */
export interface Product {
  /** Index in {@link CATALOG} (stable). */
  id: number;
  title: string;
  type: string;
  category: string;
  brand: string;
  /** 2–3 attributes, in the type pool's order. */
  attributes: string[];
  /** Option dimension → available values (2–4). */
  options: Record<string, string[]>;
  /** Price in whole dollars. */
  price: number;
}

function generateCatalog(): Product[] {
  const products: Product[] = [];
  for (const [category, spec] of Object.entries(CATEGORIES)) {
    for (const [type, [dims, basePrice]] of Object.entries(spec.types)) {
      const rng = new Rng(hash32(`webshop/catalog/${type}`));
      const pool = rng.sample(spec.attributes, 6);
      for (let k = 0; k < PRODUCTS_PER_TYPE; k++) {
        const attributes = rng.sample(pool, rng.range(2, 3))
          .sort((a, b) => pool.indexOf(a) - pool.indexOf(b));
        const options: Record<string, string[]> = {};
        for (const dim of dims) {
          const values = OPTION_VALUES[dim];
          options[dim] = rng.sample(values, rng.range(2, Math.min(4, values.length)))
            .sort((a, b) => values.indexOf(a) - values.indexOf(b));
        }
        const brand = rng.pick(BRANDS);
        const price = Math.max(3, Math.round(basePrice * (0.5 + rng.next() * 1.5)));
        products.push({
          id: products.length,
          title: `${brand} ${rng.pick(attributes)} ${type}`,
          type,
          category,
          brand,
          attributes,
          options,
          price,
        });
      }
    }
  }
  return products;
}

/** The whole catalog (1,152 products), in a fixed order. */
export const CATALOG: readonly Product[] = generateCatalog();

/** Product type → category. */
export const CATEGORY_OF: ReadonlyMap<string, string> = new Map(
  Object.entries(CATEGORIES).flatMap(([c, spec]) => Object.keys(spec.types).map((t) => [t, c])),
);
